"""The dashboard in headless Chromium against the session's live ``moescope serve`` on
Postgres (conftest's ``shared_server``).

Screenshots of each page go to test-output/screenshots/. Without Debian's chromium and
chromium-driver these tests skip on a laptop and fail under CI=true.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import browser as browser_helpers
import pytest
from conftest import _REFERENCE, IN_CI, LiveServer
from live import REPO
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from shared_server import SharedServer

from app import figures
from app.dashboard.links import case_href
from app.services.chart_panels import CHART_CASE_CAP, cap_banner

pytestmark = pytest.mark.live

SCREENSHOTS = REPO / "test-output" / "screenshots"
SCRIPT_NOTE = ("<script>window.__pwned = 1</script>"
               "<img src=x onerror=\"window.__pwned = 2\">")
WAIT_S = 30
BIG_CASES = CHART_CASE_CAP + 7
ODD_CASE_ID = "odd/id %2F?x=1#<b>y</b>"  # path, escape, query and fragment characters

# Every chart drawn by plotly, with the number of data points it holds.
DRAWN = """
return Array.from(document.querySelectorAll('.js-plotly-plot'))
  .filter(g => g._fullData && g.querySelector('.main-svg'))
  .map(g => [g.parentElement.id || g.id, g._fullData.reduce(
      (n, t) => n + (t.z ? t.z.length : (t.x ? t.x.length : 0)), 0)]);
"""


def require_chromium() -> None:
    browser_helpers.require_chromium(IN_CI)


@pytest.fixture(scope="module")
def reports() -> dict[str, Any]:
    scripted = copy.deepcopy(_REFERENCE)
    scripted["meta"]["runId"] = "script-notes"
    scripted["meta"]["gpu"] = "<img src=x onerror=\"window.__pwned = 3\">GPU"
    scripted["meta"]["timingNote"] = SCRIPT_NOTE
    scripted["meta"]["surpriseNote"] = "<b>not bold</b>"
    scripted["cases"] = scripted["cases"][:6]
    scripted["cases"][0]["id"] = ODD_CASE_ID
    head = copy.deepcopy(_REFERENCE)
    head["meta"]["runId"] = "head"
    head["cases"][0]["layerMS"] *= 1.2
    big = copy.deepcopy(_REFERENCE)  # just over the chart cap: the banner shows
    big["meta"]["runId"] = "over-the-cap"
    base = big["cases"]
    big["cases"] = [{**copy.deepcopy(base[i % len(base)]),
                     "id": f"{base[i % len(base)]['id']}-{i}"} for i in range(BIG_CASES)]
    return {"reference": copy.deepcopy(_REFERENCE), "scripted": scripted, "head": head,
            "big": big}


@pytest.fixture(scope="module")
def server(shared_server: SharedServer, reports: dict[str, Any]
           ) -> tuple[LiveServer, dict[str, int]]:
    """The session's server holding this module's four reports and nothing else: the
    report list shows every report, so the database is emptied first."""
    shared_server.empty()
    names = ("reference", "scripted", "head", "big")
    ids = shared_server.post([reports[name] for name in names])
    return shared_server.live, dict(zip(names, ids, strict=True))


@pytest.fixture(scope="module")
def browser(chromium: WebDriver) -> WebDriver:
    """The session's Chromium (conftest's ``chromium``) at this module's window size."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return browser_helpers.take(chromium, "1500,1100")


@pytest.fixture
def page(browser: WebDriver, server: tuple[LiveServer, dict[str, int]]
         ) -> Iterator[Callable[[str], WebDriver]]:
    """Open a path; after the test, the console must hold no error."""
    base = server[0].url
    browser.get_log("browser")  # drop what earlier tests left

    def open_(path: str) -> WebDriver:
        browser.get(base + path)
        return browser

    yield open_
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any], what: str) -> Any:
    try:
        # Dash replaces elements as callbacks answer: an element found a moment ago may be
        # gone when read, which is "not yet", not a failure.
        return WebDriverWait(driver, WAIT_S, poll_frequency=0.1, ignored_exceptions=(
            NoSuchElementException, StaleElementReferenceException)).until(condition)
    except TimeoutException:
        shot = SCREENSHOTS / f"timeout-{int(time.time())}.png"
        driver.save_screenshot(str(shot))
        raise AssertionError(f"timed out waiting for {what} (screenshot {shot})") from None


def drawn(driver: WebDriver) -> dict[str, int]:
    return dict(driver.execute_script(DRAWN))


def wait_for_charts(driver: WebDriver, count: int) -> dict[str, int]:
    return wait_for(driver, lambda d: (c := drawn(d)) and len(c) >= count and c,
                    f"{count} drawn charts")


def shot(driver: WebDriver, name: str) -> None:
    # Full height, so the screenshot shows every chart and the table.
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1500, min(max(1100, height), 9000))
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    driver.set_window_size(1500, 1100)


def test_reports_page_lists_posted_reports(page: Callable[[str], WebDriver],
                                           server: tuple[LiveServer, dict[str, int]]) -> None:
    driver = page("/")
    table = wait_for(driver, lambda d: d.find_elements(By.ID, "reports-table"), "report list")
    text = table[0].text
    assert "NVIDIA Blackwell Ultra / GB300 NVL72" in text
    assert "<img src=x onerror=\"window.__pwned = 3\">GPU" in text  # shown, not parsed
    assert "over-the-cap" in text and "script-notes" in text  # run ids tell reports apart
    hrefs = {a.get_attribute("href") for a in table[0].find_elements(By.TAG_NAME, "a")}
    reports = {h for h in hrefs if "/compare?" not in h}
    assert reports == {f"{server[0].url}/reports/{i}" for i in server[1].values()}
    # "compare with previous": a report against an earlier one of those listed.
    for href in hrefs - reports:
        query = dict(part.split("=") for part in href.split("?", 1)[1].split("&"))
        base, head = int(query["base"]), int(query["head"])
        assert {base, head} <= set(server[1].values()) and base < head, href
    shot(driver, "reports")


def test_reference_report_draws_every_chart(page: Callable[[str], WebDriver],
                                            server: tuple[LiveServer, dict[str, int]]) -> None:
    driver = page(f"/reports/{server[1]['reference']}")
    charts = wait_for_charts(driver, len(figures.CHARTS))
    assert set(charts) == {f"report-graph-{c.key}" for c in figures.CHARTS}
    # The reference has no phaseMS: the phases chart is left out (its row hidden, a line
    # says why) and drawn empty; every other chart has points.
    left_out = {k for k in charts if not driver.find_element(
        By.ID, k.replace("report-graph-", "report-chart-")).is_displayed()}
    assert left_out == {"report-graph-phases"}
    assert all(points > 0 for k, points in charts.items() if k not in left_out), charts
    assert charts["report-graph-phases"] == 0
    assert driver.find_element(By.ID, "report-count").text == "63 of 63 cases in view"
    links = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR,
                                                        ".ag-row a.case-link"),
                     "case table rows")
    rid = server[1]["reference"]
    assert {a.get_attribute("href") for a in links} <= {
        server[0].url + case_href(rid, c["id"]) for c in _REFERENCE["cases"]}
    notes = driver.find_element(By.ID, "report-notes").text
    assert "peakNote" in notes and "placementNote" in notes
    # plotly.js's cartesian bundle draws the charts; the full one is never fetched.
    scripts = driver.execute_script(
        "return performance.getEntriesByType('resource').map(r => r.name)")
    assert any("plotly-cartesian.min.js" in s for s in scripts), scripts
    assert not any("plotly.min.js" in s for s in scripts), scripts
    # No Babel polyfill (app/dashboard/__init__.py): the browser's own array iterators and
    # trim (core-js marks the functions it puts in their place), and regeneratorRuntime
    # for Dash's lazy components (the dropdowns, the graphs, the table drawn above).
    assert not any("polyfill" in s for s in scripts), scripts
    assert driver.execute_script("""
        return typeof regeneratorRuntime === 'object' && [Array.prototype.values,
            Array.prototype[Symbol.iterator], String.prototype.trim, Number.parseFloat]
          .every(f => !Object.getOwnPropertyNames(f).some(n => n.startsWith('Symbol(src)')));
        """)
    shot(driver, "report")


def test_filter_changes_charts_and_url(page: Callable[[str], WebDriver],
                                       server: tuple[LiveServer, dict[str, int]]) -> None:
    rid = server[1]["reference"]
    driver = page(f"/reports/{rid}")
    before = wait_for_charts(driver, len(figures.CHARTS))
    driver.find_element(By.ID, "report-filter-precision").click()
    option = wait_for(driver, lambda d: [o for o in d.find_elements(By.CSS_SELECTOR,
                                                                    "[role=option]")
                                         # its count under the other filters
                                         if o.text == "bf16 (18)"], "the bf16 option")
    option[0].click()
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    wait_for(driver, lambda d: d.find_element(By.ID, "report-count").text
             == "18 of 63 cases in view", "the filtered count")
    after = wait_for(driver, lambda d: (c := drawn(d))["report-graph-throughput"] == 18 and c,
                     "redrawn charts")
    assert after["report-graph-throughput"] < before["report-graph-throughput"]
    wait_for(driver, lambda d: d.current_url.endswith(f"/reports/{rid}?precision=bf16"),
             "the filter in the URL")
    shot(driver, "report-filtered")
    # The URL restores the view.
    driver.get(driver.current_url)
    wait_for(driver, lambda d: d.find_elements(By.ID, "report-count")
             and d.find_element(By.ID, "report-count").text == "18 of 63 cases in view",
             "the view from the URL")


def test_case_page_renders(page: Callable[[str], WebDriver],
                           server: tuple[LiveServer, dict[str, int]],
                           reports: dict[str, Any]) -> None:
    case = next(c for c in reports["reference"]["cases"] if c["mode"] == "training")
    driver = page(f"/reports/{server[1]['reference']}/cases/{quote(case['id'], safe='')}")
    charts = wait_for_charts(driver, 4)
    assert all(points > 0 for points in charts.values()), charts
    assert driver.find_element(By.ID, "case-id").text == case["id"]
    assert "allocatedPeakGiB" in driver.find_element(By.ID, "case-fields").text
    shot(driver, "case")


def test_a_case_id_with_slashes_opens_from_the_table(
        page: Callable[[str], WebDriver], server: tuple[LiveServer, dict[str, int]]) -> None:
    driver = page(f"/reports/{server[1]['scripted']}")
    links = wait_for(driver, lambda d: [a for a in d.find_elements(
        By.CSS_SELECTOR, ".ag-row a.case-link") if a.text == ODD_CASE_ID], "the odd case's link")
    links[0].click()
    heading = wait_for(driver, lambda d: d.find_elements(By.ID, "case-id"), "the case page")
    assert heading[0].text == ODD_CASE_ID
    assert driver.current_url.endswith(case_href(server[1]["scripted"], ODD_CASE_ID))
    # An inference case without phaseMS: windows, received rows and memory (no phase chart).
    wait_for_charts(driver, 3)


def test_compare_page_renders(page: Callable[[str], WebDriver],
                              server: tuple[LiveServer, dict[str, int]]) -> None:
    ids = server[1]
    driver = page(f"/compare?base={ids['reference']}&head={ids['head']}")
    summary = wait_for(driver, lambda d: d.find_elements(By.ID, "compare-summary"), "summary")
    assert summary[0].text.startswith("63 matched cases: 1 regression, 0 improvements")
    assert len(driver.find_elements(By.CSS_SELECTOR, "#compare-table td.regression")) == 1
    wait_for(driver, lambda d: "compare-ratio" in drawn(d), "the ratio chart")
    shot(driver, "compare")
    driver = page(f"/compare?base={ids['reference']}&head=999999")
    missing = wait_for(driver, lambda d: d.find_elements(By.ID, "compare-missing"), "notice")
    assert missing[0].text == "head report 999999 does not exist"


def test_script_bearing_notes_run_nothing(page: Callable[[str], WebDriver],
                                          server: tuple[LiveServer, dict[str, int]]) -> None:
    driver = page(f"/reports/{server[1]['scripted']}")
    wait_for_charts(driver, len(figures.CHARTS))
    notes = driver.find_element(By.ID, "report-notes").text
    assert SCRIPT_NOTE in notes and "<b>not bold</b>" in notes and "surpriseNote" in notes
    assert SCRIPT_NOTE in driver.find_element(By.ID, "report-aside-throughput").text
    assert driver.find_element(By.ID, "report-gpu").text.startswith("<img src=x")
    assert driver.execute_script("return window.__pwned") is None
    assert driver.find_elements(By.CSS_SELECTOR, "img[src=x]") == []
    shot(driver, "report-script-notes")


def test_a_report_over_the_chart_cap_says_so(page: Callable[[str], WebDriver],
                                             server: tuple[LiveServer, dict[str, int]]) -> None:
    driver = page(f"/reports/{server[1]['big']}")
    charts = wait_for_charts(driver, len(figures.CHARTS))
    assert charts["report-graph-throughput"] == CHART_CASE_CAP
    # The routing chart: a heatmap row and an imbalance point per charted case.
    assert charts["report-graph-routing"] == 2 * CHART_CASE_CAP
    banner = driver.find_element(By.ID, "report-cap-banner")
    assert banner.is_displayed()
    assert banner.text == cap_banner(CHART_CASE_CAP, BIG_CASES)
    assert driver.find_element(By.ID, "report-count").text == \
        f"{BIG_CASES} of {BIG_CASES} cases in view"
    shot(driver, "report-over-the-cap")


def test_the_case_tables_numbers_keep_their_digits(browser: WebDriver) -> None:
    """The grid's number formatter (static/): F=12288 must not read 1.229e+4."""
    browser.get("about:blank")
    script = (REPO / "static" / "dashAgGridComponentFunctions.js").read_text()
    shown = browser.execute_script(
        script + "; return [12288, 1.0, 12345.6, 45.61234, 0.000123456, null]"
        ".map(v => window.dashAgGridFunctions.caseNumber(v));")
    assert shown == ["12,288", "1", "12,350", "45.61", "0.0001235", ""]
