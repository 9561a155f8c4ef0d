"""The compare page (with its ratio chart) and the case page in headless Chromium, on screen
and printed, against the session's live ``moescope serve`` holding a series whose newest
report has its nine nvfp4 mega cases slower in the combine phase and a new driver.
Screenshots and PDFs: test-output/screenshots/compare-*, case-verdict-*."""

from __future__ import annotations

import base64
import shutil
import subprocess
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
import test_dashboard_browser
from compare_helpers import combine_slowed
from conftest import _REFERENCE, LiveServer
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from shared_server import SharedServer, on_gpu
from test_dashboard_browser import SCREENSHOTS, drawn, shot, wait_for

pytestmark = pytest.mark.live

browser = test_dashboard_browser.browser
page = test_dashboard_browser.page

GPU = "NVIDIA Blackwell Ultra (compare tests) / GB300 NVL72"


@pytest.fixture(scope="module")
def server(shared_server: SharedServer) -> tuple[LiveServer, dict[str, Any]]:
    """The series on the session's server, under a GPU of this module's own. Compare opens
    on the newest report of the whole database: it is emptied first, so that report is
    this series' newest (no other module posts while this one's tests run)."""
    bodies, slowed = combine_slowed(_REFERENCE)
    bodies[-1]["meta"]["host"]["driver"] = "580.159"
    shared_server.empty()
    ids = shared_server.post(on_gpu(bodies, GPU))
    return shared_server.live, {"ids": ids, "slowed": slowed}


def printed(driver: WebDriver, name: str) -> int:
    """Print the page to test-output/screenshots/NAME.pdf (and its pages as PNGs when
    poppler is there); the number of pages."""
    pdf = base64.b64decode(driver.execute_cdp_cmd("Page.printToPDF", {
        "printBackground": True, "preferCSSPageSize": True})["data"])
    path = SCREENSHOTS / f"{name}.pdf"
    path.write_bytes(pdf)
    if shutil.which("pdftoppm"):
        for old in SCREENSHOTS.glob(f"{name}-page-*.png"):
            old.unlink()
        subprocess.run(["pdftoppm", "-r", "60", "-png", str(path),
                        str(SCREENSHOTS / f"{name}-page")], check=True)
    return pdf.count(b"/Type /Page") - pdf.count(b"/Type /Pages")


def test_compare_opens_on_the_newest_pair_and_explains(
    page: Callable[[str], WebDriver], server: tuple[LiveServer, dict[str, Any]]
) -> None:
    ids, slowed = server[1]["ids"], server[1]["slowed"]
    driver = page("/compare")
    wait_for(driver, lambda d: "compare-ratio" in drawn(d), "the ratio chart")
    bars = driver.execute_script(
        "return document.getElementById('compare-ratio').querySelector('.js-plotly-plot')"
        "._fullData.reduce((n, t) => n + t.y.length, 0)")
    assert bars == 63  # a bar per matched case
    provenance = driver.find_element(By.ID, "compare-provenance").text
    assert "host.driver 580.95 580.159" in provenance
    groups = driver.find_element(By.ID, "compare-groups").text
    assert groups.startswith("9 inference nvfp4 mega cases: +")
    rows = driver.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr")
    first = rows[0].find_elements(By.TAG_NAME, "td")
    assert first[0].text in slowed and first[1].text.startswith("regression +")
    assert first[2].text.startswith("combine +")
    assert "vs history median of 5" in first[1].text
    base, head = (driver.find_element(By.ID, f"compare-{r}").text for r in ("base", "head"))
    assert base.startswith(f"#{ids[-2]} ") and head.startswith(f"#{ids[-1]} ")
    # At the size a person reads it: the top (provenance, verdict, chart), then the table.
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(str(SCREENSHOTS / "compare-screen-top.png"))
    driver.execute_script("document.getElementById('compare-table').scrollIntoView()")
    driver.save_screenshot(str(SCREENSHOTS / "compare-screen-table.png"))
    # Printed, the table fits the page's width instead of running off its edge.
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    table, body = driver.execute_script(
        "return [document.getElementById('compare-table').getBoundingClientRect().right,"
        " document.body.getBoundingClientRect().right]")
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    assert table <= body + 1, (table, body)
    shot(driver, "compare-screen")
    assert printed(driver, "compare-print") >= 1


def test_case_page_shows_its_verdict(
    page: Callable[[str], WebDriver], server: tuple[LiveServer, dict[str, Any]]
) -> None:
    ids, slowed = server[1]["ids"], server[1]["slowed"]
    driver = page(f"/reports/{ids[-1]}/cases/{quote(slowed[0], safe='')}")
    wait_for(driver, lambda d: len(drawn(d)) >= 4, "the case charts")
    assert "case-graph-saved-bytes" not in drawn(driver)  # inference: no saved activations
    verdict = driver.find_element(By.ID, "case-verdict").text
    assert verdict.startswith("regression: +") and "why: combine +" in verdict
    link = driver.find_element(By.ID, "case-history-link")
    assert "/history?caseId=" in (link.get_attribute("href") or "")
    assert " ms" in driver.find_element(By.ID, "case-fields").text
    driver.save_screenshot(str(SCREENSHOTS / "case-verdict-screen-top.png"))
    shot(driver, "case-verdict-screen")
    assert printed(driver, "case-verdict-print") >= 1


def test_report_page_shows_host_and_compare_with_previous(
    page: Callable[[str], WebDriver], server: tuple[LiveServer, dict[str, Any]]
) -> None:
    ids = server[1]["ids"]
    driver = page(f"/reports/{ids[-1]}")
    line = wait_for(driver, lambda d: d.find_elements(By.ID, "report-provenance"),
                    "the host line")[0]
    assert "driver 580.159" in line.text and "NCCL 2.27.7" in line.text
    driver.find_element(By.ID, "report-compare-previous").click()
    wait_for(driver, lambda d: "compare-ratio" in drawn(d), "the compare page's chart")
    assert driver.current_url.endswith(f"/compare?base={ids[-2]}&head={ids[-1]}")
    driver.get(driver.current_url.split("/compare")[0] + f"/reports/{ids[-1]}")
    wait_for(driver, lambda d: d.find_elements(By.ID, "report-provenance"), "the host line")
    driver.save_screenshot(str(SCREENSHOTS / "report-host-top.png"))
