#!/usr/bin/env python3
"""Watches the receiver's console in Debian's chromium over WebDriver (selenium), headless, while a
stream raises and clears an alarm, for AlarmEndToEndTests.swift. Prints one JSON object with what it
saw; the Swift test judges it.

usage: alarm_browser.py URL SCREENSHOT_PATH READY_PATH (made once the console is open)
"""
import json, sys, time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

url, screenshot, ready = sys.argv[1], sys.argv[2], sys.argv[3]
options = Options()
options.binary_location = "/usr/bin/chromium"
for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,700"):
    options.add_argument(argument)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
result = {"raised": None, "cleared": False}


def banner():
    element = driver.find_element(By.ID, "alarms")
    return element.text if element.is_displayed() else ""


try:
    driver.get(url)
    open(ready, "w").close()
    # The alarm is raised: the banner names the stream and the alarm, the row is tinted and shows
    # a badge in its state cell.
    deadline = time.time() + 60
    while time.time() < deadline:
        text = banner()
        if text:
            row = driver.find_element(By.CSS_SELECTOR, "#streams tbody tr")
            result["raised"] = {
                "banner": text,
                "row_class": row.get_attribute("class"),
                "badges": [badge.text for badge in row.find_elements(By.CSS_SELECTOR, ".state .alarm")],
            }
            driver.save_screenshot(screenshot)
            break
        time.sleep(0.1)
    # ...and cleared: the banner goes, the row is plain again.
    deadline = time.time() + 60
    while result["raised"] and time.time() < deadline:
        if not banner():
            row = driver.find_element(By.CSS_SELECTOR, "#streams tbody tr")
            result["cleared"] = True
            result["row_class_after"] = row.get_attribute("class")
            result["badges_after"] = [badge.text for badge in row.find_elements(By.CSS_SELECTOR, ".state .alarm")]
            break
        time.sleep(0.1)
finally:
    driver.quit()
print(json.dumps(result))
