"""The history page and the report page's history marks in headless Chromium, against the
session's live ``moescope serve`` on Postgres holding a synthetic series (three cases slowed
15 %, one sped up 12 % in the newest report). Screenshots: test-output/screenshots/history-*."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs, urlparse

import pytest
import test_dashboard_browser
from conftest import _REFERENCE, LiveServer
from history_helpers import synthetic_series
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from shared_server import SharedServer, on_gpu
from test_dashboard_browser import (
    SCREENSHOTS,
    drawn,
    shot,
    wait_for,
    wait_for_charts,
)

pytestmark = pytest.mark.live

# The dashboard tests' browser and page fixtures, shared rather than written again.
browser = test_dashboard_browser.browser
page = test_dashboard_browser.page

IDS = [c["id"] for c in _REFERENCE["cases"]]
SLOWED, SPED = [IDS[0], IDS[20], IDS[45]], IDS[36]
GPU = "NVIDIA Blackwell Ultra (history tests) / GB300 NVL72"


@pytest.fixture(scope="module")
def server(shared_server: SharedServer) -> tuple[LiveServer, dict[str, int]]:
    """The series on the session's server, under a GPU of this module's own: its history
    is these eight reports alone."""
    reports = synthetic_series(_REFERENCE, 8, seed=2,
                               newest_factor={**dict.fromkeys(SLOWED, 1.15), SPED: 0.88})
    ids = shared_server.post(on_gpu(reports, GPU))
    return shared_server.live, {"first": ids[0], "newest": ids[-1]}


def test_report_page_marks_the_moved_cases(
    page: Callable[[str], WebDriver], server: tuple[LiveServer, dict[str, int]]
) -> None:
    driver = page(f"/reports/{server[1]['newest']}")
    wait_for_charts(driver, 9)
    moved = driver.find_element(By.ID, "report-moved")
    assert "4 of 63 cases judged moved past 5 %" in moved.text
    rows = [r.text for r in moved.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert sorted(r.split()[1] for r in rows) == sorted([*SLOWED, SPED])
    assert sum(r.startswith("regression") for r in rows) == 3
    # The table: every case carries its change against history, flagged ones with an arrow.
    marks = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".ag-row a.trend"),
                     "history marks in the case table")
    texts = [m.text for m in marks]
    assert any(t.startswith("\u25b2 +1") for t in texts), texts
    href = urlparse(marks[0].get_attribute("href"))
    assert href.path == "/history"
    assert parse_qs(href.query)["gpu"] == [GPU]
    # The charts' hover names the moved cases' change after their id.
    hovered = driver.execute_script("""
        return Array.from(document.querySelectorAll('#report-charts .js-plotly-plot'))
          .flatMap(g => g._fullData.flatMap(t => (t.customdata || []).map(c => c[0])))
          .filter(first => String(first).includes(' vs history'));""")
    marked = {first.split(" \u00b7 ")[0] for first in hovered}
    assert marked == {*SLOWED, SPED}, hovered
    assert any(" \u00b7 \u25b2 +1" in first for first in hovered), hovered
    shot(driver, "history-report-flagged")
    # At the size a person reads them: the summary above the charts, and the table.
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(str(SCREENSHOTS / "history-report-top.png"))
    driver.execute_script("document.getElementById('report-grid').scrollIntoView()")
    driver.save_screenshot(str(SCREENSHOTS / "history-report-table.png"))


def test_history_page_draws_the_trend(
    page: Callable[[str], WebDriver], server: tuple[LiveServer, dict[str, int]]
) -> None:
    driver = page(f"/reports/{server[1]['newest']}")
    link = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#report-moved a"),
                    "a moved case's history link")[0]
    case_id = link.text
    link.click()
    # The report page's charts stay drawn until the history page replaces them: wait for its own.
    wanted = {"history-graph-layer-time", "history-graph-throughput"}
    wait_for(driver, lambda d: wanted <= set(drawn(d)), "the history page's two charts")
    assert driver.find_element(By.ID, "history-case-id").text == case_id
    verdict = driver.find_element(By.ID, "history-verdict")
    assert f"report #{server[1]['newest']}: regression, layer time +1" in verdict.text
    points = driver.find_elements(By.CSS_SELECTOR, "#history-points tbody tr")
    assert len(points) == 8
    assert points[-1].text.split()[1] == f"#{server[1]['first']}"
    shot(driver, "history-page")


def test_history_page_without_a_case_says_so(page: Callable[[str], WebDriver]) -> None:
    driver = page("/history?caseId=nope&gpu=none")
    found = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".empty"), "message")
    assert "no report on GPU 'none' holds case 'nope'" in found[0].text
