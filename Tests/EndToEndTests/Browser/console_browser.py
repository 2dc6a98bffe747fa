#!/usr/bin/env python3
"""Drives the receiver's console in Debian's chromium over WebDriver (selenium), headless, for
ConsoleBrowserTests.swift. Prints one JSON object with what it saw; the Swift test judges it.

usage: console_browser.py URL EXPECTED_ROWS SCREENSHOT_PATH
"""
import json, sys, time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

url, expected_rows, screenshot = sys.argv[1], int(sys.argv[2]), sys.argv[3]
options = Options()
options.binary_location = "/usr/bin/chromium"
for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,700",
                 "--autoplay-policy=no-user-gesture-required", "--mute-audio"):
    options.add_argument(argument)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
result = {}
try:
    driver.get(url)
    deadline = time.time() + 20
    rows = []
    while time.time() < deadline:
        rows = driver.find_elements(By.CSS_SELECTOR, "#streams tbody tr")
        live = [r for r in rows if r.find_element(By.CSS_SELECTOR, ".state").text == "live"
                and r.find_elements(By.CSS_SELECTOR, ".meter")]
        if len(live) >= expected_rows:
            break
        time.sleep(0.2)
    result["rows"] = len(rows)
    result["names"] = sorted(r.find_element(By.CSS_SELECTOR, ".name").text for r in rows)
    result["states"] = sorted(r.find_element(By.CSS_SELECTOR, ".state").text for r in rows)
    result["link"] = driver.find_element(By.ID, "link").text
    # The meters move: pictures of the levels cell taken over 1.2 s (the level changes every 0.25 s)
    # are not all the same, and neither are the meter widths. Two pictures alone can both fall in a
    # quiet quarter second.
    cell = rows[0].find_element(By.CSS_SELECTOR, ".levels")
    pictures, widths = [], []
    for _ in range(8):
        pictures.append(cell.screenshot_as_png)
        widths.append(driver.execute_script("return arguments[0].querySelector('.rms').style.width", cell))
        time.sleep(0.15)
    result["meter_pictures_differ"] = len(set(pictures)) > 1
    result["meter_widths"] = widths
    result["meter_titles"] = [m.get_attribute("title") for m in rows[0].find_elements(By.CSS_SELECTOR, ".meter")]
    driver.save_screenshot(screenshot)
    # Play: the browser's own <audio> element on the listen URL; its currentTime must advance.
    rows[0].find_element(By.CSS_SELECTOR, "button.play").click()
    times = []
    deadline = time.time() + 15
    while time.time() < deadline:
        times.append(driver.execute_script("return document.getElementById('player').currentTime"))
        if times[-1] > 1.0:
            break
        time.sleep(0.25)
    result["current_times"] = times[-5:]
    result["audio_src"] = driver.execute_script("return document.getElementById('player').currentSrc")
    result["audio_error"] = driver.execute_script("const e = document.getElementById('player').error; return e ? e.code + ' ' + e.message : null")
    result["button"] = rows[0].find_element(By.CSS_SELECTOR, "button.play").text
finally:
    driver.quit()
print(json.dumps(result))
