"""Dashboard speed against a live ``moescope serve`` on Postgres.

Measures, for the reference report (63 cases) and a synthetic report of 5,000 cases:
- the time until the report page has drawn every chart in headless Chromium
  (from navigation start, as the page's own clock reads it; first load and warm loads);
- the filter callback's server time: the callback called as a plain function in this
  process, and the same callback through HTTP POST /_dash-update-component.

Targets: reference page drawn within 2 s; 5,000 cases within 6 s; the filter callback
under 300 ms at p95. Prints the figures and PASS/FAIL.

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

DRAWN_JS = """
const done = arguments[arguments.length - 1];
const want = arguments[0];
function check() {
  const drawn = Array.from(document.querySelectorAll('.js-plotly-plot'))
    .filter(g => g._fullData && g.querySelector('.main-svg')).length;
  if (drawn >= want) { done(performance.now()); } else { setTimeout(check, 10); }
}
check();
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


FILTERS = (  # the precision filter toggled, as a user does
    [[], [], ["bf16"], [], [], [], []],
    [[], [], ["mxfp8"], [], [], [], []],
    [["training"], [], [], [], [], [], []],
    [[], [], [], [], [], [], []],
)


def plain_callback_times(report_id: int, n: int) -> list[float]:
    from app.dashboard.pages import report as page

    calls = iter(range(10**9))
    # None: no store of history marks, as for a report without history.
    return time_calls(
        lambda: page.refilter(*FILTERS[next(calls) % len(FILTERS)], report_id, None), n)


def http_callback_times(base_url: str, report_id: int, n: int) -> list[float]:
    from app.case_fields import FILTERABLE

    deps = httpx.get(base_url + "/_dash-dependencies", timeout=30).json()
    spec = next(d for d in deps if "report-graph-throughput.figure" in d["output"])

    def body(values: list[list[str]]) -> dict[str, Any]:
        by_id = dict(zip([f"report-filter-{f.wire}" for f in FILTERABLE], values, strict=True))
        outputs = [{"id": o.split(".")[0], "property": o.split(".")[1]}
                   for o in spec["output"].strip(".").split("...")]
        return {
            "output": spec["output"], "outputs": outputs,
            "inputs": [{"id": i["id"], "property": i["property"], "value": by_id[i["id"]]}
                       for i in spec["inputs"]],
            # The report's id, and no store of history marks (a report without history).
            "state": [{"id": s["id"], "property": s["property"],
                       "value": report_id if s["id"] == "report-id" else None}
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


def page_draw_times(base_url: str, report_id: int, loads: int) -> list[float]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--window-size=1500,1100"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_script_timeout(120)
    driver.set_page_load_timeout(120)
    try:
        samples = []
        for _ in range(loads):
            driver.get(f"{base_url}/reports/{report_id}")
            samples.append(float(driver.execute_async_script(DRAWN_JS, chart_count())))
        return samples
    finally:
        driver.quit()


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


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
