"""Dashboard speed against a live ``moescope serve`` on Postgres.

Measures, for the reference report (63 cases) and a synthetic report of 5,000 cases:
- the time until the report page has drawn every chart in headless Chromium
  (from navigation start, as the page's own clock reads it; first load and warm loads);
- the filter callback's server time: the callback called as a plain function in this
  process, and the same callback through HTTP POST /_dash-update-component.

Targets: reference page drawn within 2 s; 5,000 cases within 6 s; the filter callback
under 300 ms at p95. For the reference also: the page fully drawn (every chart and the
configuration matrix) within 1.1 x a static plotly page of the same figures, loaded in the
same browser in the same run, and a filter change (precision = bf16, set in the browser)
redrawn on screen in under 0.5 s: the count, the matrix, the table if on screen and every
chart intersecting the 1500 x 1100 window (charts further away are drawn when they come
near; at the top of the page and scrolled to the first chart). Also printed, with no
target: the filter change with every chart redrawn, scrolling through the page. Prints the
figures and PASS/FAIL.

    MOESCOPE_BENCH_POSTGRES_URL=postgresql+psycopg://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/dashboard.py [--calls 50] [--loads 5]

The URL names an existing database used only to create (and drop) a scratch database.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO / "tests"))  # live.py: a server process, a scratch database
SYNTHETIC_CASES = 5000
PAGE_TARGET_S = {"reference": 2.0, "synthetic": 6.0}
CALLBACK_P95_TARGET_MS = 300.0
STATIC_RATIO_TARGET = 1.1
REDRAW_TARGET_S = 0.5
WINDOW = "1500,1100"  # the browser window, width x height in px

DRAWN_JS = """
const done = arguments[arguments.length - 1];
const want = arguments[0];
function check() {
  const drawn = Array.from(document.querySelectorAll('.js-plotly-plot'))
    .filter(g => g._fullData && g.querySelector('.main-svg')).length;
  // The report page also draws its configuration matrix; a static page has none.
  const matrix = !document.getElementById('report-matrix-section')
    || document.getElementById('report-matrix-table');
  if (drawn >= want && matrix) { done(performance.now()); } else { setTimeout(check, 10); }
}
check();
"""


TABLE_JS = """
const done = arguments[arguments.length - 1];
(function check() {
  if (document.querySelector('#report-grid .ag-row')) { done(); } else { setTimeout(check, 10); }
})();
"""


def chart_count() -> int:
    # Every chart of the report page, so a chart added to the list is waited for too.
    from app.figures import CHARTS

    return len(CHARTS)


def reference_report() -> dict[str, Any]:
    text = resources.files("ingest").joinpath("data", "gb300-nvl72-isolated-v6.json")
    return dict(json.loads(text.read_text("utf-8")))


def synthetic_report(size: int) -> dict[str, Any]:
    """The reference's cases repeated under new ids, times varied a little."""
    report = reference_report()
    base = report["cases"]
    cases = []
    for i in range(size):
        case = copy.deepcopy(base[i % len(base)])
        scale = 1.0 + (i % 17) / 100.0
        case["id"] = f"{case['id']}-r{i // len(base)}"
        for key in ("forwardMS", "layerMS"):
            case[key] *= scale
        if case["backwardMS"] is not None:
            case["backwardMS"] = case["layerMS"] - case["forwardMS"]
        case["windows"] = {k: [v * scale for v in vals] for k, vals in case["windows"].items()}
        case["usefulTFPerGPU"] /= scale
        case["analyticalHBMGBps"] /= scale
        cases.append(case)
    report["cases"] = cases
    report["meta"]["runId"] = f"synthetic-{size}"
    return report


def ingest(database_url: str, report: dict[str, Any]) -> int:
    from app.core.db import session_scope, transaction
    from app.services import reports as report_service

    with session_scope(database_url) as session, transaction(session):
        return report_service.ingest(session, report).id


def percentiles(samples_ms: list[float]) -> tuple[float, float]:
    ordered = sorted(samples_ms)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered), p95


def time_calls(call: Callable[[], Any], n: int) -> list[float]:
    call()  # warm: imports, connections, plotly's first use
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _filters(**chosen: list[str]) -> list[list[str]]:
    from app.case_fields import FILTERABLE

    return [chosen.get(f.wire, []) for f in FILTERABLE]


FILTERS = (  # the precision filter toggled, as a user does
    _filters(precision=["bf16"]),
    _filters(precision=["mxfp8"]),
    _filters(mode=["training"]),
    _filters(),
)

# Set the precision filter as the dropdown would and time until the page shows the new view.
# Either what is on screen (mode 'screen'): the count; the matrix's cells naming only cases
# of the view; the table, if it is on screen, paged over the view's rows, its rendered rows
# all of the view; every chart intersecting the window drawn (not stale) with only cases of
# the view. Or every chart (mode 'scroll'): the count, then each chart in turn scrolled into
# view and waited for. The summary, notes and caveat list come in the same callback answer
# as the count. Answers the time and how many charts (and whether the table) it waited for.
REDRAW_JS = """
const done = arguments[arguments.length - 1];
const [ids, countText, mode] = [new Set(arguments[0]), arguments[1], arguments[2]];
const start = performance.now();
window.dash_clientside.set_props('report-filter-precision', {value: ['bf16']});
// A hover id may carry a mark after ' · ' (a case that moved against its history).
const inView = shown => shown.length > 0 && shown.every(id => ids.has(String(id).split(' · ')[0]));
const onScreen = el => { const box = el.getBoundingClientRect();
                         return box.height > 0 && box.bottom > 0 && box.top < window.innerHeight; };
function chartDrawn(row) {
  const g = row.querySelector('.js-plotly-plot');
  if (!g || !g._fullData || !g.querySelector('.main-svg')
      || row.querySelector('.stale')) { return false; }
  const shown = [];
  for (const trace of g.data) {
    for (const r of trace.customdata || []) {
      const first = Array.isArray(r) ? r[0] : r;
      if (first != null) { shown.push(first); }
    }
  }
  return inView(shown);
}
const rows = () => Array.from(document.querySelectorAll('#report-charts .chart-row'))
  .filter(row => !row.hidden);
function matrixDrawn() {
  const cells = Array.from(document.querySelectorAll('#report-matrix-table td.matrix-cell'));
  return inView(cells.map(td => td.title.split(' (')[0]));
}
function tableDrawn() {
  const paging = document.querySelector('#report-grid .ag-paging-row-summary-panel');
  const links = Array.from(document.querySelectorAll('#report-grid .ag-row .case-link'));
  return paging && paging.textContent.trim().endsWith(' of ' + ids.size)
    && inView(links.map(a => a.textContent));
}
const counted = () => document.getElementById('report-count').textContent === countText;
function screen() {
  const charts = rows().filter(onScreen);
  const grid = document.getElementById('report-grid');
  const table = grid !== null && onScreen(grid);
  if (counted() && matrixDrawn() && (!table || tableDrawn()) && charts.every(chartDrawn)) {
    done([performance.now() - start, charts.length, table]);
  } else { setTimeout(screen, 5); }
}
let next = 0;
function scroll() {
  const all = rows();
  if (!counted()) { setTimeout(scroll, 5); return; }
  if (next === all.length) { done([performance.now() - start, all.length, false]); return; }
  all[next].scrollIntoView();
  if (chartDrawn(all[next])) { next += 1; scroll(); } else { setTimeout(scroll, 5); }
}
(mode === 'scroll' ? scroll : screen)();
"""


def plain_callback_times(report_id: int, n: int) -> list[float]:
    from app.dashboard.pages import report as page
    from app.matrix_metrics import DEFAULT_METRIC

    calls = iter(range(10**9))
    # None: no store of history marks, as for a report without history; no digests of what
    # the page shows, so every part is sent.
    return time_calls(lambda: page.refilter(*FILTERS[next(calls) % len(FILTERS)], report_id,
                                            None, DEFAULT_METRIC, None), n)


def http_callback_times(base_url: str, report_id: int, n: int) -> list[float]:
    from app.case_fields import FILTERABLE
    from app.matrix_metrics import DEFAULT_METRIC

    deps = httpx.get(base_url + "/_dash-dependencies", timeout=30).json()
    spec = next(d for d in deps if "report-figures.data" in d["output"])

    def body(values: list[list[str]]) -> dict[str, Any]:
        by_id = dict(zip([f"report-filter-{f.wire}" for f in FILTERABLE], values, strict=True))
        outputs = [{"id": o.split(".")[0], "property": o.split(".")[1]}
                   for o in spec["output"].strip(".").split("...")]
        return {
            "output": spec["output"], "outputs": outputs,
            "inputs": [{"id": i["id"], "property": i["property"], "value": by_id[i["id"]]}
                       for i in spec["inputs"]],
            # The report's id, no store of history marks (a report without history), the
            # matrix's default metric, no digests of what the page shows (send every part).
            "state": [{"id": s["id"], "property": s["property"],
                       "value": {"report-id": report_id,
                                 "report-matrix-metric": DEFAULT_METRIC}.get(s["id"])}
                      for s in spec["state"]],
            "changedPropIds": ["report-filter-precision.value"],
        }

    calls = iter(range(10**9))
    with httpx.Client(base_url=base_url, timeout=60) as client:
        def post() -> None:
            response = client.post("/_dash-update-component",
                                   json=body(FILTERS[next(calls) % len(FILTERS)]))
            response.raise_for_status()
        return time_calls(post, n)


def _chromium() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", f"--window-size={WINDOW}",
                "--allow-file-access-from-files"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_script_timeout(120)
    driver.set_page_load_timeout(120)
    return driver


def page_draw_times(base_url: str, report_id: int, loads: int) -> list[float]:
    driver = _chromium()
    try:
        samples = []
        for _ in range(loads):
            driver.get(f"{base_url}/reports/{report_id}")
            samples.append(float(driver.execute_async_script(DRAWN_JS, chart_count())))
        return samples
    finally:
        driver.quit()


def static_page(database_url: str, report_id: int, path: Path) -> Path:
    """One HTML file drawing the report page's figures for the unfiltered view (the same
    specs, from the same builders; a chart the page leaves out, its empty figure too) with
    the page's own plotly.js bundle, nothing else."""
    from app.case_fields import CaseFilter
    from app.core.db import session_scope
    from app.dashboard.pages.report import NOT_DRAWN
    from app.services.report_view import ReportCache, report_view

    with session_scope(database_url) as session:
        panels = report_view(ReportCache(), session, report_id, CaseFilter()).panels
    return write_static_page([NOT_DRAWN if p.absent else p.figure for p in panels], path)


def write_static_page(specs: list[Any], path: Path) -> Path:
    """The figures drawn by the page's plotly.js bundle alone, one after the other."""
    bundle = (REPO / "static" / "vendor" / "plotly-cartesian.min.js").read_text("utf-8")
    divs = "".join(f'<div id="g{i}" style="height:{f["layout"].get("height", 420)}px">'
                   "</div>" for i, f in enumerate(specs))
    draws = "".join(
        f"Plotly.newPlot('g{i}', {json.dumps(f['data'])}, "
        f"{json.dumps(f['layout'])}, {{responsive: true, displaylogo: false}});"
        for i, f in enumerate(specs))
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><script>{bundle}"
                    f"</script></head><body>{divs}<script>{draws}</script></body></html>",
                    "utf-8")
    return path


def paired_draw_times(base_url: str, report_id: int, static: Path, loads: int
                      ) -> tuple[list[float], list[float]]:
    """The report page and the static page, loaded in turn in one browser."""
    driver = _chromium()
    try:
        page, plain = [], []
        for _ in range(loads):
            driver.get(f"{base_url}/reports/{report_id}")
            page.append(float(driver.execute_async_script(DRAWN_JS, chart_count())))
            driver.get(static.as_uri())
            plain.append(float(driver.execute_async_script(DRAWN_JS, chart_count())))
        return page, plain
    finally:
        driver.quit()


Redraw = tuple[float, int, bool]  # ms; charts waited for; the table waited for


def redraw_times(base_url: str, report_id: int, in_view: list[str], total: int, loads: int,
                 mode: str, scrolled_to: str | None = None) -> list[Redraw]:
    """A filter change on a freshly loaded page: ``mode`` 'screen' (what the window shows,
    at the top of the page or with ``scrolled_to``'s top at the window's) or 'scroll'."""
    driver = _chromium()
    try:
        samples = []
        for _ in range(loads):
            driver.get(f"{base_url}/reports/{report_id}")
            driver.execute_async_script(DRAWN_JS, chart_count())
            # The page as a user finds it a moment later: the case table built (below the
            # charts, once they are drawn and the browser is idle) and holding its rows.
            driver.execute_async_script(TABLE_JS)
            if scrolled_to:
                driver.execute_script(f"document.getElementById('{scrolled_to}')"
                                      ".scrollIntoView()")
            ms, charts, table = driver.execute_async_script(
                REDRAW_JS, in_view, f"{len(in_view)} of {total} cases in view", mode)
            samples.append((float(ms), int(charts), bool(table)))
        return samples
    finally:
        driver.quit()


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def reference_checks(database_url: str, base: str, report_id: int, loads: int, tmp: Path
                     ) -> int:
    """The page against a static page of its figures, and a filter change redrawn."""
    static = static_page(database_url, report_id, tmp / "static.html")
    page, plain = paired_draw_times(base, report_id, static, loads + 1)
    page_s, plain_s = statistics.median(page[1:]) / 1000, statistics.median(plain[1:]) / 1000
    ratio = page_s / plain_s
    failures = int(ratio > STATIC_RATIO_TARGET)
    print(f"[reference] page fully drawn (matrix and {chart_count()} charts): median "
          f"{page_s:.2f} s; static plotly page of the same figures: {plain_s:.2f} s; "
          f"ratio {ratio:.2f} (target <= {STATIC_RATIO_TARGET:g}) "
          f"{verdict(ratio <= STATIC_RATIO_TARGET)}")
    cases = reference_report()["cases"]
    bf16 = [c["id"] for c in cases if c["precision"] == "bf16"]
    for where, scrolled_to in (("at the top of the page", None),
                               ("scrolled to the first chart", "report-chart-throughput")):
        redraws = redraw_times(base, report_id, bf16, len(cases), loads, "screen", scrolled_to)
        redraw = statistics.median(r[0] for r in redraws) / 1000
        failures += int(redraw >= REDRAW_TARGET_S)
        charts = sorted({r[1] for r in redraws})
        table = "the table rows on screen, " if any(r[2] for r in redraws) else ""
        print(f"[reference] filter change (precision = bf16), what is on screen redrawn, "
              f"{where} ({WINDOW} window; the count, the matrix, {table}"
              f"{'/'.join(map(str, charts))} chart(s) on screen showing the new view): "
              f"median {redraw:.2f} s, max {max(r[0] for r in redraws) / 1000:.2f} s over "
              f"{len(redraws)} (target < {REDRAW_TARGET_S:g} s) "
              f"{verdict(redraw < REDRAW_TARGET_S)}")
    scrolls = [r[0] for r in redraw_times(base, report_id, bf16, len(cases), loads, "scroll")]
    print(f"[reference] filter change (precision = bf16), every chart redrawn, scrolling "
          f"through the page (each scrolled into view in turn and waited for): median "
          f"{statistics.median(scrolls) / 1000:.2f} s, max {max(scrolls) / 1000:.2f} s over "
          f"{len(scrolls)} (no target: the cost of drawing every chart)")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50, help="callback calls per series")
    parser.add_argument("--loads", type=int, default=5, help="page loads per report")
    parser.add_argument("--cases", type=int, default=SYNTHETIC_CASES)
    parser.add_argument("--only", choices=("reference", "synthetic"),
                        help="measure one report only (quicker while iterating)")
    args = parser.parse_args()
    from live import scratch_postgres_database, serve_process

    admin = os.environ.get("MOESCOPE_BENCH_POSTGRES_URL",
                           "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    failures = 0
    with scratch_postgres_database(admin, prefix="moescope_bench_dash") as url, \
            tempfile.TemporaryDirectory() as tmp:
        os.environ["MOESCOPE_DATABASE_URL"] = url
        from app.main import create_app
        from db.migrate import upgrade

        upgrade(url)
        ids = {}
        if args.only in (None, "reference"):
            ids["reference"] = ingest(url, reference_report())
        if args.only in (None, "synthetic"):
            ids["synthetic"] = ingest(url, synthetic_report(args.cases))
        create_app()  # the Dash app must exist before its pages import
        # The server moves its start-up's objects out of the collector's sight
        # (app/main.warm_up); the in-process callbacks run in the same state.
        gc.collect()
        gc.freeze()
        with serve_process(url, Path(tmp) / "server.log") as server:
            base = server.url
            print(f"server {base} on Postgres; synthetic report: {args.cases} cases")
            if "reference" in ids:
                failures += reference_checks(url, base, ids["reference"], args.loads,
                                             Path(tmp))
            for name, rid in ids.items():
                draws = page_draw_times(base, rid, args.loads)
                warm = statistics.median(draws[1:]) if len(draws) > 1 else draws[0]
                ok = warm / 1000 <= PAGE_TARGET_S[name]
                failures += not ok
                print(f"[{name}] page drawn (all {chart_count()} charts): first "
                      f"{draws[0] / 1000:.2f} s, warm median {warm / 1000:.2f} s "
                      f"(target {PAGE_TARGET_S[name]:g} s) {verdict(ok)}")
                for label, samples in (
                    ("plain function", plain_callback_times(rid, args.calls)),
                    ("HTTP /_dash-update-component", http_callback_times(base, rid, args.calls)),
                ):
                    p50, p95 = percentiles(samples)
                    ok = p95 < CALLBACK_P95_TARGET_MS
                    failures += not ok
                    print(f"[{name}] filter callback, {label}: p50 {p50:.0f} ms, "
                          f"p95 {p95:.0f} ms over {len(samples)} calls "
                          f"(target p95 < {CALLBACK_P95_TARGET_MS:g} ms) {verdict(ok)}")
        from app.core.db import engine_for

        engine_for(url).dispose()
    print("ALL PASS" if failures == 0 else f"{failures} FAIL")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
