"""The report page answering at a glance, in headless Chromium against a live server on
Postgres: configuration ticks on every per-case chart, the configuration matrix, and a bad
URL filter's message. Screenshots at 1440 and 1024 px go to test-output/screenshots/."""

from __future__ import annotations

import re

import pytest
from browser import take
from conftest import _REFERENCE, LiveServer
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from shared_server import SharedServer, on_gpu
from test_dashboard_browser import SCREENSHOTS, wait_for, wait_for_charts

from app import figures

pytestmark = pytest.mark.live

# Every chart that places one point (or bar) per case on the configuration axis.
# (plotly's tick class: x, or x3 for the memory chart's labelled bottom panel).
PER_CASE = {"throughput": "x", "percent-of-peak": "x", "layer-time": "x", "nvlink": "x",
            "hbm": "x", "memory": "x3", "phases": "x"}
TICKS = """
return Array.from(document.querySelectorAll(
    '#report-graph-' + arguments[0] + ' .' + arguments[1] + 'tick text'))
  .map(t => t.textContent);
"""
GPU = "NVIDIA Blackwell Ultra (report page tests) / GB300 NVL72"
LABEL = re.compile(r"^EP\d+F\d+i\d+(\.\d+)?$")  # 'EP8<br>F3072<br>i1' as drawn (tspans)


@pytest.fixture(scope="module")
def server(shared_server: SharedServer) -> tuple[LiveServer, int]:
    """The reference on the session's server, under a GPU of this module's own."""
    (report_id,) = shared_server.post(on_gpu([_REFERENCE], GPU))
    return shared_server.live, report_id


@pytest.fixture(scope="module", params=["1440,1100", "1024,900"])
def browser(request: pytest.FixtureRequest, chromium: WebDriver) -> WebDriver:
    """The session's Chromium at each width in turn."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return take(chromium, request.param)


def _width(driver: WebDriver) -> int:
    return int(driver.execute_script("return window.innerWidth"))


def test_every_per_case_chart_names_configurations(
    browser: WebDriver, server: tuple[LiveServer, int]
) -> None:
    live, report_id = server
    browser.get(f"{live.url}/reports/{report_id}")
    wait_for_charts(browser, len(figures.CHARTS))
    configs = {(c["mode"], c["category"], c["ep"], c["F"], c["imbalance"])
               for c in _REFERENCE["cases"]}
    for chart, axis in PER_CASE.items():
        ticks = browser.execute_script(TICKS, chart, axis)
        if chart == "phases":
            # The reference has no phaseMS: the chart is left out, one line says why.
            assert not browser.find_element(By.ID, f"report-chart-{chart}").is_displayed()
            line = browser.find_element(By.ID, "report-absent-charts").text
            assert line == ("Phases not drawn: no case in view has per-phase times (phaseMS: "
                            "the runner did not time phases).")
            continue
        assert len(ticks) == len(configs) == 18, (chart, ticks)
        assert all(LABEL.match(t) for t in ticks), (chart, ticks)
        title = browser.find_element(By.ID, f"report-graph-{chart}").text
        assert "view order" not in title
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(_width(browser), min(height, 9000))
    browser.save_screenshot(str(SCREENSHOTS / f"report-{_width(browser)}.png"))


def test_the_matrix_has_a_row_per_configuration_and_its_blanks(
    browser: WebDriver, server: tuple[LiveServer, int]
) -> None:
    live, report_id = server
    browser.get(f"{live.url}/reports/{report_id}")
    table = wait_for(browser, lambda d: d.find_elements(By.ID, "report-matrix-table"),
                     "the configuration matrix")[0]
    rows = table.find_elements(By.CSS_SELECTOR, "th.matrix-config")
    configs = {(c["mode"], c["category"], c["ep"], c["F"], c["imbalance"])
               for c in _REFERENCE["cases"]}
    assert len(rows) == len(configs) == 18
    # Training ran no nvfp4: its 9 rows have one blank each, and nothing else is blank.
    blanks = table.find_elements(By.CSS_SELECTOR, "td.matrix-blank")
    assert len(blanks) == 9 and all(b.text == "" for b in blanks)
    cells = table.find_elements(By.CSS_SELECTOR, "td.matrix-cell")
    assert len(cells) == len(_REFERENCE["cases"])
    assert len(table.find_elements(By.CSS_SELECTOR, "td.matrix-best")) == 18
    first = cells[0]
    case_id = "inference-ep8-bf16-standard-single_layer-F3072-i1"
    assert first.get_attribute("title") == case_id
    first.find_element(By.TAG_NAME, "a").click()
    wait_for(browser, lambda d: d.current_url.endswith(f"/reports/{report_id}/cases/{case_id}"),
             "the case page")


def test_a_bad_url_filter_shows_its_message(
    browser: WebDriver, server: tuple[LiveServer, int]
) -> None:
    live, report_id = server
    browser.get(f"{live.url}/reports/{report_id}?precision=NVFP4&ep=banana")
    message = wait_for(browser, lambda d: [e for e in d.find_elements(
        By.ID, "report-url-problems") if e.is_displayed()], "the URL's message")[0].text
    assert "precision='NVFP4' matches no case of this report" in message
    assert "precision = bf16, mxfp8, nvfp4" in message
    assert "ep='banana' is not a whole number" in message and "8, 16, 32, 64" in message
    # The bad values filter nothing: every case is in view.
    count = browser.find_element(By.ID, "report-count").text
    assert count == "63 of 63 cases in view"



MATRIX_NOTE = "#report-matrix .muted"  # the line under the matrix names its metric


def test_the_matrix_keeps_its_metric_through_a_filter_change(
    browser: WebDriver, server: tuple[LiveServer, int]
) -> None:
    """The filters redraw the matrix in the same answer as the charts, with the metric the
    page shows; the metric alone redraws only the matrix."""
    live, report_id = server
    browser.get(f"{live.url}/reports/{report_id}")
    wait_for_charts(browser, len(figures.CHARTS))
    browser.execute_script("window.dash_clientside.set_props("
                           "'report-matrix-metric', {value: 'percentOfPeak'})")
    wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, MATRIX_NOTE).text
             .startswith("% of peak per case"), "the matrix in % of peak")
    browser.execute_script("window.dash_clientside.set_props("
                           "'report-filter-precision', {value: ['nvfp4']})")
    wait_for(browser, lambda d: d.find_element(By.ID, "report-count").text
             == "9 of 63 cases in view", "the filtered count")
    # The cells read in one script: the matrix may be replaced between two reads.
    cells = wait_for(browser, lambda d: (c := d.execute_script(
        "return Array.from(document.querySelectorAll('#report-matrix-table td.matrix-cell'))"
        ".map(td => [td.title, td.innerText])")) and len(c) == 9 and c, "the filtered matrix")
    nvfp4 = sorted(c["id"] for c in _REFERENCE["cases"] if c["precision"] == "nvfp4")
    assert sorted(title.split(" (")[0] for title, _ in cells) == nvfp4
    # % of peak to one decimal (the default metric, TFLOP/s, has none).
    assert all(re.fullmatch(r"(\u2605 )?[\d,]+\.\d", text.strip()) for _, text in cells), \
        cells
    assert browser.find_element(By.CSS_SELECTOR, MATRIX_NOTE).text.startswith(
        "% of peak per case")


# The case ids a chart draws (a hover id may carry a mark after ' · '), and whether it
# waits, dimmed, for its filtered figure.
CHART_CASES = """
const outer = document.getElementById('report-graph-' + arguments[0]);
const graph = outer && (outer._fullData ? outer : outer.querySelector('.js-plotly-plot'));
if (!graph || !graph._fullData) { return null; }
const ids = graph._fullData.flatMap(t => Array.from(t.customdata || [])
    .map(row => String(Array.isArray(row) ? row[0] : row).split(' · ')[0]));
return {ids: ids, stale: graph.closest('.chart').classList.contains('stale')};
"""


def test_a_filter_change_draws_the_charts_in_sight_and_the_rest_when_scrolled_to(
    browser: WebDriver, server: tuple[LiveServer, int]
) -> None:
    """A chart near the viewport shows the filtered cases at once; one far below keeps its
    figure, marked stale, until it is scrolled into view, then shows the filtered cases."""
    live, report_id = server
    # A window of a screen's height (a screenshot before may have grown it to the page's).
    browser.set_window_size(browser.get_window_size()["width"], 900)
    browser.get(f"{live.url}/reports/{report_id}")
    wait_for_charts(browser, len(figures.CHARTS))
    nvfp4 = {c["id"] for c in _REFERENCE["cases"] if c["precision"] == "nvfp4"}
    seen = "throughput"
    # The first chart at the top of the window; the last chart drawn per case is more
    # than two window heights below it (far in both window sizes).
    far = browser.execute_script("""
        document.getElementById('report-chart-throughput').scrollIntoView();
        const rows = Array.from(document.querySelectorAll('#report-charts .chart-row'))
            .filter(r => !r.hidden);
        const last = rows[rows.length - 1];
        return last.getBoundingClientRect().top > 2.2 * window.innerHeight
            ? last.id.replace('report-chart-', '') : null;""")
    assert far, "no chart far enough below the first to stay pending"
    before = set(browser.execute_script(CHART_CASES, far)["ids"])
    assert before - nvfp4 and before & nvfp4, before  # the filter changes what it draws
    browser.execute_script("window.dash_clientside.set_props("
                           "'report-filter-precision', {value: ['nvfp4']})")
    wait_for(browser, lambda d: d.find_element(By.ID, "report-count").text
             == "9 of 63 cases in view", "the filtered count")
    wait_for(browser, lambda d: set((d.execute_script(CHART_CASES, seen) or {})
                                    .get("ids", [])) == nvfp4, "the chart in view redrawn")
    pending = browser.execute_script(CHART_CASES, far)
    assert pending["stale"] and set(pending["ids"]) == before, pending
    browser.execute_script(f"document.getElementById('report-chart-{far}').scrollIntoView()")
    wait_for(browser, lambda d: (c := d.execute_script(CHART_CASES, far))
             and not c["stale"] and set(c["ids"]) == before & nvfp4,
             "the chart scrolled into view redrawn")


TABLE = """
const grid = document.getElementById('report-grid');
const paging = grid && grid.querySelector('.ag-paging-row-summary-panel');
return grid && {cases: paging ? paging.textContent.trim().split(' of ').pop() : null,
                stale: document.getElementById('report-table').classList.contains('stale')};
"""


def test_the_case_table_takes_a_filters_rows_when_it_comes_near(
    browser: WebDriver, server: tuple[LiveServer, int]
) -> None:
    """The table is built below the charts once they are drawn, with every case. A filter
    changed at the top of the page leaves it dimmed with its rows until it is scrolled
    to; then it shows the view's."""
    live, report_id = server
    browser.set_window_size(browser.get_window_size()["width"], 900)
    browser.get(f"{live.url}/reports/{report_id}")
    wait_for_charts(browser, len(figures.CHARTS))
    wait_for(browser, lambda d: (d.execute_script(TABLE) or {}).get("cases") == "63",
             "the table built with every case")
    browser.execute_script("window.scrollTo(0, 0)")
    browser.execute_script("window.dash_clientside.set_props("
                           "'report-filter-precision', {value: ['nvfp4']})")
    wait_for(browser, lambda d: d.find_element(By.ID, "report-count").text
             == "9 of 63 cases in view", "the filtered count")
    waiting = wait_for(browser, lambda d: (t := d.execute_script(TABLE))["stale"] and t,
                       "the table far below waiting")
    assert waiting["cases"] == "63", waiting
    browser.execute_script("document.getElementById('report-grid').scrollIntoView()")
    wait_for(browser, lambda d: d.execute_script(TABLE) == {"cases": "9", "stale": False},
             "the table scrolled to showing the view")
    links = browser.execute_script("return Array.from(document.querySelectorAll("
                                   "'#report-grid .ag-row a.case-link')).map(a => a.text)")
    nvfp4 = {c["id"] for c in _REFERENCE["cases"] if c["precision"] == "nvfp4"}
    assert set(links) == nvfp4


def test_printing_draws_every_pending_chart(
    browser: WebDriver, server: tuple[LiveServer, int]
) -> None:
    """Before the page is printed, a chart far below (pending since the filter change)
    shows the filtered cases, with no scrolling."""
    live, report_id = server
    browser.set_window_size(browser.get_window_size()["width"], 900)
    browser.get(f"{live.url}/reports/{report_id}")
    wait_for_charts(browser, len(figures.CHARTS))
    nvfp4 = {c["id"] for c in _REFERENCE["cases"] if c["precision"] == "nvfp4"}
    before = set(browser.execute_script(CHART_CASES, "intensity")["ids"])
    browser.execute_script("window.dash_clientside.set_props("
                           "'report-filter-precision', {value: ['nvfp4']})")
    wait_for(browser, lambda d: d.find_element(By.ID, "report-count").text
             == "9 of 63 cases in view", "the filtered count")
    wait_for(browser, lambda d: d.execute_script(CHART_CASES, "intensity")["stale"],
             "the chart far below pending")
    browser.execute_script("window.dispatchEvent(new Event('beforeprint'))")
    drawn = browser.execute_script(CHART_CASES, "intensity")  # at once, not awaited
    assert not drawn["stale"] and set(drawn["ids"]) == before & nvfp4, drawn
