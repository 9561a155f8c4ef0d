"""The test session's one headless Chromium (conftest's ``chromium`` fixture): started once,
each browser test module taking it at its own window size with a clean state (``take``).
Its network is cut to this machine (no name resolves): every page the tests open is a
local server's or a local file, and nothing may reach further."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM = Path("/usr/bin/chromium")
NETWORK_CUT = "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"
LOGS = {"browser": "ALL", "performance": "ALL"}
PAGE_LOAD_S = 60


def require_chromium(in_ci: bool) -> None:
    if CHROMEDRIVER.exists() and CHROMIUM.exists():
        return
    reason = "chromium and chromium-driver are not installed (apt-get install chromium " \
             "chromium-driver)"
    if in_ci:
        pytest.fail(reason + " (CI=true: browser tests may not skip)", pytrace=False)
    pytest.skip(reason)


def start_chromium(window_size: str, logs: dict[str, str], *extra: str) -> WebDriver:
    """Headless Chromium, keeping the given logs (goog:loggingPrefs)."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", f"--window-size={window_size}", *extra):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", logs)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


def take(driver: WebDriver, window_size: str) -> WebDriver:
    """The shared browser at ``window_size`` ("1440,1100"), as a fresh one would be: online,
    screen media, on a blank page, its logs emptied."""
    width, height = (int(v) for v in window_size.split(","))
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    driver.get("about:blank")
    driver.set_window_size(width, height)
    driver.get_log("browser")
    driver.get_log("performance")
    return driver
