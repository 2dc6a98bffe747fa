#!/usr/bin/env python3
"""A DNS rebinding attack on the receiver's console in Debian's chromium (headless, over WebDriver),
for ConsoleRebindingTests.swift: the browser's resolver maps NAME to 127.0.0.1, as an attacker's DNS
would once the attacker's page is loaded; the page at NAME then reads the console with a script.
Prints one JSON object with what the browser got; the Swift test judges it.

usage: rebinding_browser.py NAME URL
"""
import json, sys

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

name, url = sys.argv[1], sys.argv[2]
options = Options()
options.binary_location = "/usr/bin/chromium"
for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                 f"--host-resolver-rules=MAP {name} 127.0.0.1", "--no-proxy-server"):
    options.add_argument(argument)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
result = {}
try:
    driver.get(url)
    result["text"] = driver.find_element(By.TAG_NAME, "body").text
    # The attacker's script, same-origin with the rebound name: what can it read?
    driver.set_script_timeout(20)
    result["fetch_status"] = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0]).then(r => done(r.status), e => done(String(e)));", url)
finally:
    driver.quit()
print(json.dumps(result))
