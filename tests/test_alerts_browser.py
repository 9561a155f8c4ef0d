"""The alerts inbox in headless Chromium, against a live ``moescope serve`` on Postgres whose
reports went through the API: the step's one alert with its why, linked from the report
page; an admin triages it with a reason and the log shows who did it.
Screenshots: test-output/screenshots/alerts.png, report-alerts.png."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import test_dashboard_browser
from alert_helpers import combine_step
from compare_helpers import nvfp4_mega, series
from conftest import _REFERENCE, LiveServer
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from shared_server import SharedServer, on_gpu
from test_dashboard_browser import SCREENSHOTS, require_chromium, wait_for

pytestmark = pytest.mark.live

browser = test_dashboard_browser.browser
page = test_dashboard_browser.page

STEP_AT, REPORTS = 20, 25  # told by the step's fifth report: the newest


# A GPU of this module's own: its series, and so its alerts, are its alone on the shared
# server (tests/shared_server.py).
GPU = "NVIDIA Blackwell Ultra (alerts tests) / GB300 NVL72"


@pytest.fixture(scope="module")
def server(shared_server: SharedServer) -> tuple[LiveServer, dict[str, Any]]:
    require_chromium()
    bodies = series(_REFERENCE, REPORTS)
    combine_step(bodies, nvfp4_mega(bodies[0]), STEP_AT, 20.0)
    ids = shared_server.post(on_gpu(bodies, GPU))
    return shared_server.live, {"ids": ids, "admin": shared_server.admin_token}


def test_an_admin_triages_the_alert_of_a_step(
    page: Callable[[str], WebDriver], server: tuple[LiveServer, dict[str, Any]]
) -> None:
    live, ids = server[0], server[1]["ids"]
    [alert] = httpx.get(f"{live.url}/api/v1/alerts", params={"gpu": GPU},
                        timeout=30).json()["items"]
    assert alert["firstBadReportId"] == ids[STEP_AT] and alert["reportId"] == ids[-1]

    driver = page(f"/reports/{ids[-1]}")
    link = wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#report-alerts a"),
                    "the report's alert link")
    assert link.text.startswith(f"#{alert['id']} regression in combine, 9 cases, "
                                 f"first bad report {ids[STEP_AT]} (new)")
    # The report page says the alert's why beside its link, as the export does.
    assert driver.find_element(By.CSS_SELECTOR, "#report-alerts .alert-why").text == alert["why"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    driver.save_screenshot(str(SCREENSHOTS / "report-alerts.png"))
    link.click()
    wait_for(driver, lambda d: d.find_elements(By.ID, "alerts-count"), "the alerts page")
    why = wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, ".alert-why"),
                   "the alert")
    assert why.text == alert["why"]
    assert "Triage needs an admin token" in driver.find_element(By.ID, "alerts-message").text
    assert not driver.find_elements(By.CSS_SELECTOR, "button.alert-triage")

    path = f"/alerts?id={alert['id']}"
    driver.get(f"{live.url}/login?" + urlencode({"next": path}))
    driver.find_element(By.NAME, "token").send_keys(server[1]["admin"])
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    reason = wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, ".alert input"),
                      "the triage controls")
    reason.send_keys("driver bug, reported upstream")
    driver.find_element(By.XPATH, "//button[text()='acknowledged']").click()
    logged = wait_for(driver, lambda d: d.find_element(By.ID, "alert-events"), "the log")
    assert "new → acknowledged" in logged.text and "driver bug, reported upstream" in logged.text
    assert driver.find_element(By.ID, "alerts-message").text == (
        f"alert #{alert['id']}: acknowledged")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / "alerts.png"))

    detail = httpx.get(f"{live.url}/api/v1/alerts/{alert['id']}", timeout=30).json()
    assert detail["state"] == "acknowledged"
    assert [(e["toState"], e["createdBy"]) for e in detail["events"]] == [
        ("acknowledged", "browser-admin")]
    driver.get(live.url + "/logout")
