"""/docs and /redoc with the network cut: Chromium can resolve no host but the server's
address, and every request the pages make must go to the server. Both draw every
operation of the spec from the assets the app serves."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import httpx
import pytest
from browser import take
from conftest import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver
from shared_server import SharedServer
from test_dashboard_browser import SCREENSHOTS

pytestmark = pytest.mark.live

WAIT_S = 60
# Swagger UI draws each operation as an .opblock; Redoc gives each a section id ending in
# "operation/<operationId>" (twice: under its tag and on its own).
COUNTS = {
    "/docs": "return document.querySelectorAll('.opblock').length",
    "/redoc": "return new Set([...document.querySelectorAll('[data-section-id*=\"operation/\"]')]"
              ".map(e => e.dataset.sectionId.split('operation/').pop())).size",
}


@pytest.fixture(scope="module")
def server(shared_server: SharedServer) -> LiveServer:
    """The session's server: the docs draw the app's spec, whatever its database holds."""
    return shared_server.live


@pytest.fixture(scope="module")
def browser(chromium: WebDriver) -> WebDriver:
    """The session's Chromium, its network cut to this machine (tests/browser.py): the
    docs must load with nothing from elsewhere."""
    return take(chromium, "1400,1000")


def operation_count(server: LiveServer) -> int:
    spec = httpx.get(server.url + "/openapi.json").json()
    return sum(1 for ops in spec["paths"].values() for method in ops
               if method in ("get", "post", "put", "patch", "delete"))


def open_page(driver: WebDriver, url: str, count_js: str, expected: int) -> list[str]:
    """Open the page, wait until it draws ``expected`` operations; every request's URL."""
    driver.get_log("performance")
    driver.get_log("browser")
    driver.get(url)
    deadline = time.monotonic() + WAIT_S
    drawn = 0
    while time.monotonic() < deadline:
        drawn = int(driver.execute_script(count_js))
        if drawn >= expected:
            break
        time.sleep(0.2)
    assert drawn == expected, f"{url}: {drawn} of {expected} operations drawn"
    events = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
    return [e["params"]["request"]["url"] for e in events
            if e["method"] == "Network.requestWillBeSent"]


def screenshot(driver: WebDriver, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
    path = SCREENSHOTS / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_api_docs_draw_every_operation_offline(
    browser: WebDriver, server: LiveServer, page: str
) -> None:
    expected = operation_count(server)
    assert expected >= 10
    requests = open_page(browser, server.url + page, COUNTS[page], expected)

    assert requests, "the performance log saw no request"
    elsewhere = [u for u in requests
                 if not u.startswith((server.url + "/", "data:", "blob:", "about:"))]
    assert elsewhere == [], elsewhere
    assert any(u.endswith(".js") and "/docs-assets/" in u for u in requests), requests
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    screenshot(browser, f"api{page.replace('/', '-')}")
