#!/usr/bin/env python3
"""Watches the receiver's console in Debian's chromium over WebDriver (selenium), headless, as the
person at the desk would, while one field unit takes: for ConsoleDeskEndToEndTests.swift. It opens
the stream's timeline, watches the silence alarm rise and clear, the marker and the pause appear,
and once the take is finished downloads the recording from the recordings view (a click, and
fetches with a byte range) and an export; then it looks at the page on a phone-sized screen.
Prints one JSON object with what it saw; the Swift test judges it.

usage: desk_browser.py URL READY_PATH SAW_MARKER_PATH DOWNLOAD_FOLDER SCREENSHOT_FOLDER
  READY_PATH is made once the console is open, SAW_MARKER_PATH once the timeline shows a marker.
"""
import json, os, sys, time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

url, ready, saw_marker, downloads, screenshots = sys.argv[1:6]
options = Options()
options.binary_location = "/usr/bin/chromium"
for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,900"):
    options.add_argument(argument)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
result = {"raised": None, "cleared": False, "timeline": [], "scale": [], "figures": "", "lamp_lit": False,
          "recordings": [], "download": None, "phone": None}


# What the page shows now, read in one go (the page re-renders lists while the script reads).
STATE = """
const banner = document.getElementById("alarms");
const row = document.querySelector("#streams tbody tr[data-id]");
const numbers = document.querySelector("#streams .figures .numbers");
return {
  row: row !== null,
  row_class: row ? row.className : "",
  banner: banner.hidden ? "" : banner.textContent,
  timeline: [...document.querySelectorAll("ol.timeline li.entry")].map((li) => ({ kind: li.dataset.kind, detail: li.querySelector(".detail").textContent })),
  scale: [...document.querySelectorAll("#streams .scale span")].map((span) => span.textContent),
  figures: numbers ? numbers.textContent : "",
  lamp_lit: document.querySelector("#streams .lamp.lit") !== null,
  recordings: [...document.querySelectorAll("#recordings tbody tr")].map((tr) => ({
    path: tr.dataset.path,
    start: tr.querySelector(".start").textContent, duration: tr.querySelector(".duration").textContent,
    gaps: tr.querySelector(".gaps").textContent, markers: tr.querySelector(".markers").textContent,
    complete: tr.querySelector(".complete").textContent,
    links: [...tr.querySelectorAll(".get a")].map((a) => a.textContent),
  })),
};
"""


FETCH = """
const done = arguments[arguments.length - 1];
(async () => {
  const out = {};
  const link = document.querySelector("#recordings tbody tr .get-caf");
  const range = await fetch(link.href, { headers: { Range: "bytes=0-3" } });
  out.range_status = range.status;
  out.range_content_range = range.headers.get("content-range");
  out.range_text = await range.text();
  const whole = await fetch(link.href);
  out.whole_status = whole.status;
  out.whole_length = (await whole.arrayBuffer()).byteLength;
  const wav = await fetch(document.querySelector("#recordings tbody tr .get-wav").href);
  out.wav_status = wav.status;
  out.wav_magic = new TextDecoder().decode((await wav.arrayBuffer()).slice(0, 4));
  done(out);
})().catch((e) => done({ error: String(e) }));
"""

try:
    driver.get(url)
    open(ready, "w").close()
    opened = False
    deadline = time.time() + 240
    while time.time() < deadline:
        state = driver.execute_script(STATE)
        if state["row"] and not opened:
            driver.execute_script('document.querySelector("#streams tbody tr[data-id] .timeline-toggle").click();')
            opened = True
        if state["banner"] and result["raised"] is None:
            result["raised"] = {"banner": state["banner"], "row_class": state["row_class"]}
            driver.save_screenshot(os.path.join(screenshots, "desk-alarm.png"))
        if result["raised"] is not None and not state["banner"]:
            result["cleared"] = True
        if state["timeline"]:
            result["timeline"] = state["timeline"]
            if any(entry["kind"] == "marker" for entry in state["timeline"]) and not os.path.exists(saw_marker):
                open(saw_marker, "w").close()
        if state["scale"] and not result["scale"]:
            result["scale"] = state["scale"]
        if "LUFS" in state["figures"]:
            result["figures"] = state["figures"]
        result["lamp_lit"] = result["lamp_lit"] or state["lamp_lit"]
        result["recordings"] = state["recordings"]
        finished = any(entry["kind"] == "finished" for entry in result["timeline"])
        if state["recordings"] and finished and result["cleared"]:
            break
        time.sleep(0.1)

    if result["recordings"]:
        driver.save_screenshot(os.path.join(screenshots, "desk.png"))
        result["fetches"] = driver.execute_async_script(FETCH)
        # A click on the CAF link downloads the file.
        driver.execute_script('document.querySelector("#recordings tbody tr .get-caf").click();')
        deadline = time.time() + 60
        while time.time() < deadline:
            names = [name for name in os.listdir(downloads) if not name.endswith(".crdownload")]
            if names:
                path = os.path.join(downloads, names[0])
                result["download"] = {"name": names[0], "bytes": os.path.getsize(path)}
                break
            time.sleep(0.1)
    # A phone's screen: nothing wider than the screen.
    driver.set_window_size(390, 844)
    deadline = time.time() + 10
    while driver.execute_script("return window.innerWidth;") > 400 and time.time() < deadline:
        time.sleep(0.05)
    result["phone"] = driver.execute_script(
        "return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth,"
        " hidden_head: getComputedStyle(document.querySelector('#streams thead')).display};")
    driver.save_screenshot(os.path.join(screenshots, "desk-phone.png"))
finally:
    driver.quit()
print(json.dumps(result))
