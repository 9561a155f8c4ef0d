"""Marks from the history page in headless Chromium, against the session's live ``moescope
serve`` on Postgres: an admin signs in, marks the report where a case's level moved as a
step, and the next reports are judged against the new level (the regressions API says so); undo
restores the old judgement. A reader who is not an admin sees no controls.
Screenshots: test-output/screenshots/history-marked*.png (1440 px wide)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import test_dashboard_browser
from compare_helpers import nvfp4_mega, series, slow_down
from conftest import _REFERENCE, LiveServer
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from shared_server import SharedServer, on_gpu
from test_dashboard_browser import SCREENSHOTS, drawn, wait_for

pytestmark = pytest.mark.live

browser = test_dashboard_browser.browser
page = test_dashboard_browser.page

REPORTS, SHIFT_AT = 12, 6
CASE = nvfp4_mega(_REFERENCE)[0]
GPU = "NVIDIA Blackwell Ultra (history marks tests) / GB300 NVL72"


def _shifted() -> list[dict[str, Any]]:
    """The case 20 % slower from report SHIFT_AT on (all of it in experts: a new level),
    and the newest a further 18 % slower, all of that in combine."""
    bodies = series(_REFERENCE, REPORTS)
    for i, body in enumerate(bodies[SHIFT_AT:], start=SHIFT_AT):
        case = next(c for c in body["cases"] if c["id"] == CASE)
        extra = 0.2 * case["layerMS"]
        slow_down(case, extra)
        case["phaseMS"]["experts"] += extra
        if i == REPORTS - 1:
            extra = 0.18 * case["layerMS"]
            slow_down(case, extra)
            case["phaseMS"]["combine"] += extra
    return bodies


@pytest.fixture(scope="module")
def server(shared_server: SharedServer) -> tuple[LiveServer, dict[str, Any]]:
    """The series on the session's server, under a GPU of this module's own: the marks
    and the judgements the test reads are of these twelve reports alone."""
    live = shared_server.live
    ids = shared_server.post(on_gpu(_shifted(), GPU))
    return live, {"ids": ids, "admin": live.token("admin"), "read": live.token("read")}


def _flagged(live: LiveServer, report_id: int) -> dict[str, str]:
    body = httpx.get(f"{live.url}/api/v1/reports/{report_id}/regressions", timeout=30).json()
    return {item["caseId"]: item["kind"] for item in body["items"]}


def _sign_in(driver: WebDriver, live: LiveServer, token: str, path: str) -> None:
    driver.get(f"{live.url}/login?" + urlencode({"next": path}))
    driver.find_element(By.NAME, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def _history(driver: WebDriver) -> None:
    wait_for(driver, lambda d: {"history-graph-layer-time"} <= set(drawn(d)),
             "the history page's charts")


def test_an_admin_marks_a_step_and_undoes_it(
    page: Callable[[str], WebDriver], server: tuple[LiveServer, dict[str, Any]]
) -> None:
    live, ids = server[0], server[1]["ids"]
    path = "/history?" + urlencode({"caseId": CASE, "gpu": GPU})
    after = ids[SHIFT_AT + 3]  # the first report with three points of the new level before it
    # Unmarked, the new level is judged against the old one.
    assert _flagged(live, after) == {CASE: "regression"}

    # A reader sees no controls, and is told what it takes.
    driver = page("/")
    _sign_in(driver, live, server[1]["read"], path)
    _history(driver)
    assert "needs an admin token" in driver.find_element(By.ID, "history-mark-help").text
    assert not driver.find_elements(By.ID, "history-mark-save")

    _sign_in(driver, live, server[1]["admin"], path)
    _history(driver)
    assert driver.find_element(By.ID, "history-why").text.startswith("why: combine +")
    driver.find_element(By.ID, "history-mark-report").click()
    wait_for(driver, lambda d: d.find_elements(
        By.CSS_SELECTOR, f".dash-dropdown-option input[value='{ids[SHIFT_AT]}']"),
        "the report choices")[0].find_element(By.XPATH, "./ancestor::label").click()
    assert driver.find_element(By.ID, "history-mark-report").text.startswith(
        f"#{ids[SHIFT_AT]} ")
    driver.find_element(By.ID, "history-mark-reason").send_keys("new NCCL, expected")
    driver.find_element(By.ID, "history-mark-save").click()
    marked = wait_for(driver, lambda d: [e for e in d.find_elements(By.ID, "history-marks")
                                         if "new NCCL, expected" in e.text],
                      "the mark in the list")[0]
    assert f"report #{ids[SHIFT_AT]}" in marked.text and "marked step" in marked.text
    assert driver.find_element(By.ID, "history-mark-message").text == (
        f"report #{ids[SHIFT_AT]} marked as a step")
    # The API judges the next reports against the new level; the newest still moved, and
    # why is named against the new level too: combine alone, not the step's experts.
    assert _flagged(live, after) == {}
    assert _flagged(live, ids[-1]) == {CASE: "regression"}
    why = driver.find_element(By.ID, "history-why").text
    assert why.startswith("why: combine +") and "experts +0 %" in why, why
    # The chart draws the step where it was put.
    steps = driver.execute_script("""
        return document.getElementById('history-graph-layer-time')
          .querySelector('.js-plotly-plot').layout.shapes
          .filter(s => s.name === 'step').map(s => s.x0);""")
    assert len(steps) == 1
    _screenshots(driver)

    driver.find_element(By.CSS_SELECTOR, "#history-marks button.history-unmark").click()
    wait_for(driver, lambda d: not d.find_elements(By.ID, "history-marks"),
             "the mark's removal")
    assert driver.find_element(By.ID, "history-mark-message").text == (
        f"report #{ids[SHIFT_AT]}: step mark removed")
    assert _flagged(live, after) == {CASE: "regression"}
    driver.get(live.url + "/logout")


def _screenshots(driver: WebDriver) -> None:
    """The page at 1440 px: its top (verdict, why, chart with the step), and whole."""
    driver.set_window_size(1440, 1100)
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(str(SCREENSHOTS / "history-marked-top.png"))
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1440, min(max(1100, height), 9000))
    driver.save_screenshot(str(SCREENSHOTS / "history-marked.png"))
    driver.set_window_size(1500, 1100)
