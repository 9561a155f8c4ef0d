"""A year of runs of one series on Postgres: history and regressions against a live
``moescope serve``, and a report's stored bytes.

    .venv/bin/python bench/history.py [--reports 10000] [--requests 50] [--loads 5]

1. Loads ``--reports`` reports of the reference's series (63 cases each) into a scratch
   database on the MOESCOPE_TEST_POSTGRES_URL server (created and dropped here). 200
   distinct reports go through ingest's own code (validation, derived columns, caveats,
   the compressed body); the series cycles through them with its own dates, run ids and
   content keys, written in bulk. The newest report is posted through the service and
   holds one case new to the series.
2. Times over HTTP on loopback: GET /api/v1/history of one case (the newest points in
   full, older ones summarised: the default bound) and GET /reports/{newest}/regressions.
3. Times the history page until its charts are drawn in headless Chromium (from
   navigation start, the page's own clock; the first load, then warm loads), and the
   newest report's page: its read model built from a cold cache
   (``services.report_page.report_page``, in process) and the page drawn in Chromium
   (its charts and matrix), so what a report page costs as its series grows is measured.
4. Bytes per report (tables, their TOAST and indexes, after VACUUM FULL): 50 reports
   stored at the migration head, then taken down to 0002 (a JSON copy per case) and
   measured again.

Targets: history API p95 < 100 ms, history page drawn < 2 s, regressions p95 < 50 ms,
the report page's read model p95 < 200 ms and the page drawn < 2 s (bench/dashboard.py's
target for the same 63-case page), stored bytes at most half of 0002's. Prints the figures
and PASS/FAIL.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

from dashboard import DRAWN_JS as REPORT_DRAWN_JS  # noqa: E402
from dashboard import chart_count  # noqa: E402
from history_helpers import ingest, synthetic_series  # noqa: E402
from live import scratch_postgres_database, serve_process  # noqa: E402
from sqlalchemy import Connection, Engine, create_engine, insert, select, text  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from app import report_body  # noqa: E402
from app.models import Base, CaseRow  # noqa: E402
from app.services.reports import case_hashes, case_rows  # noqa: E402
from db.migrate import downgrade, upgrade  # noqa: E402
from ingest.provenance import provenance_key  # noqa: E402
from ingest.reference import reference_report_text  # noqa: E402
from ingest.series import series_context  # noqa: E402
from ingest.validate import parse_json, validate_report  # noqa: E402

HISTORY_P95_MS = 100.0
PAGE_S = 2.0
REPORT_MODEL_P95_MS = 200.0
REPORT_PAGE_S = 2.0
REGRESSIONS_P95_MS = 50.0
DISTINCT = 200
BATCH = 250
FIRST = date(2025, 12, 1)
TABLES = ("reports", "cases", "caveats", "report_marks")

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


def _p95_ms(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000


def _timed(call: Callable[[], object], requests: int) -> list[float]:
    for _ in range(5):  # warm the connection, the pool and the statement caches
        call()
    samples = []
    for _ in range(requests):
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    return samples


def _variants(reference: dict[str, Any]) -> list[tuple[dict[str, Any], list[dict[str, Any]],
                                                        list[list[Any]], bytes]]:
    """DISTINCT reports of the series as ingest stores them: meta, case rows (report_id
    to fill), caveats, body."""
    out = []
    for body in synthetic_series(reference, DISTINCT, seed=11):
        report = validate_report(body)
        rows, caveats = case_rows(0, report.meta, report.cases, case_hashes(body["cases"]), 0)
        out.append((body["meta"], rows, caveats, report_body.encode(body["meta"],
                                                                    body["cases"], {})))
    return out


def load(engine: Engine, reference: dict[str, Any], count: int) -> None:
    """``count`` reports of one series in bulk, one a day's fraction apart, oldest first."""
    variants = _variants(reference)
    reports = Base.metadata.tables["reports"]
    series = series_context(reference["meta"])
    with engine.begin() as connection:
        for start in range(0, count, BATCH):
            batch = range(start, min(count, start + BATCH))
            report_rows = []
            for i in batch:
                meta, _, _, body = variants[i % DISTINCT]
                meta = {**meta, "date": (FIRST + timedelta(days=i * 365 // count)).isoformat(),
                        "runId": f"bench-{i}"}
                sha = hashlib.sha256(f"bench-{i}".encode()).hexdigest()
                report_rows.append({
                    "content_sha256": sha, "current_sha256": sha,
                    "run_id": meta["runId"], "date": meta["date"], "gpu": meta["gpu"],
                    "series": series, "provenance": provenance_key(meta),
                    "source": meta.get("source"), "meta": meta, "extra": {}, "body": body,
                    "case_count": len(reference["cases"]), "best_percent_of_peak": None,
                })
            ids = connection.execute(insert(reports).returning(reports.c.id,
                                                               sort_by_parameter_order=True),
                                     report_rows).scalars().all()
            case_batch: list[dict[str, Any]] = []
            for report_id, i in zip(ids, batch, strict=True):
                _, rows, _, _ = variants[i % DISTINCT]
                case_batch.extend({**row, "report_id": report_id} for row in rows)
            _copy(connection, "cases", case_batch)
            pks = {(report_id, position): pk for report_id, position, pk in connection.execute(
                select(CaseRow.report_id, CaseRow.position, CaseRow.id)
                .where(CaseRow.report_id.in_(ids))).all()}
            caveat_rows: list[dict[str, Any]] = []
            for report_id, i in zip(ids, batch, strict=True):
                _, rows, row_caveats, _ = variants[i % DISTINCT]
                caveat_rows.extend(
                    {"case_pk": pks[(report_id, row["position"])], "code": c.code,
                     "message": c.message}
                    for row, cs in zip(rows, row_caveats, strict=True) for c in cs)
            _copy(connection, "caveats", caveat_rows)
    # What autovacuum does to a table that took 600,000 rows: statistics, and the
    # visibility map that lets the history's index-only scans skip the heap.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE"))


def _copy(connection: Connection, table: str, rows: list[dict[str, Any]]) -> None:
    """Rows into a table through COPY: Postgres's bulk path, ten times an executemany."""
    if not rows:
        return
    columns = list(rows[0])
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy_in:
        for row in rows:
            copy_in.write_row([row[c] for c in columns])


def stored_bytes(url: str) -> float:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(text("VACUUM FULL"))
            present = [t for t in TABLES if connection.execute(
                text("SELECT to_regclass(:t)"), {"t": t}).scalar() is not None]
            total = sum(connection.execute(text(f"SELECT pg_total_relation_size('{t}')"))
                        .scalar_one() for t in present)
            reports = connection.execute(text("SELECT count(*) FROM reports")).scalar_one()
        return float(total / reports)
    finally:
        engine.dispose()


def bytes_before_after(server: str, reference: dict[str, Any]) -> tuple[float, float]:
    with scratch_postgres_database(server, prefix="moescope_bench") as url:
        upgrade(url)
        engine = create_engine(url)
        with Session(engine) as session:
            for body in synthetic_series(reference, 50, seed=12):
                ingest(session, body)
        engine.dispose()
        after = stored_bytes(url)
        downgrade(url, "0002")
        before = stored_bytes(url)
    return before, after


def page_draw_times(url: str, loads: int, script: str = DRAWN_JS,
                    want: int | None = None) -> list[float]:
    """Seconds from navigation start until ``script`` says ``want`` charts are drawn
    (the history page's by default)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from app.services.history_view import CHART_COUNT

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
            driver.get(url)
            samples.append(float(driver.execute_async_script(
                script, CHART_COUNT if want is None else want)) / 1000)
        return samples
    finally:
        driver.quit()


def report_model_times(url: str, report_id: int, requests: int) -> list[float]:
    """The newest report's page model, each call from an empty cache (its cases read and
    typed again), as a first visit builds it."""
    from app.case_fields import CaseFilter
    from app.services.report_page import report_page
    from app.services.report_view import ReportCache

    engine = create_engine(url)
    try:
        with Session(engine) as session:
            return _timed(lambda: report_page(ReportCache(), session, report_id,
                                              CaseFilter()), requests)
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args(argv)

    server = os.environ.get("MOESCOPE_TEST_POSTGRES_URL",
                            "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    reference = parse_json(reference_report_text())
    case_id = reference["cases"][0]["id"]
    gpu = reference["meta"]["gpu"]
    with scratch_postgres_database(server, prefix="moescope_bench") as url:
        upgrade(url)
        engine = create_engine(url)
        t0 = time.perf_counter()
        load(engine, reference, args.reports - 1)
        newest_body = copy.deepcopy(reference)
        newest_body["meta"]["date"] = (FIRST + timedelta(days=365)).isoformat()
        newest_body["meta"]["runId"] = "bench-newest"
        newest_body["cases"].append({**reference["cases"][1], "id": "a-case-new-to-the-series"})
        with Session(engine) as session:
            newest = ingest(session, newest_body)
        engine.dispose()
        print(f"stored {args.reports} reports x {len(reference['cases'])} cases "
              f"in {time.perf_counter() - t0:.1f} s")

        with tempfile.TemporaryDirectory() as tmp, serve_process(
            url, Path(tmp) / "server.log", ready_path="/readyz"
        ) as live, httpx.Client(base_url=live.url, timeout=30) as http:
            history_path = "/api/v1/history?" + urlencode({"caseId": case_id, "gpu": gpu})
            regressions_path = f"/api/v1/reports/{newest}/regressions"

            def getter(path: str) -> Callable[[], httpx.Response]:
                def get() -> httpx.Response:
                    response = http.get(path)
                    if response.status_code != 200:
                        raise SystemExit(f"GET {path}: {response.status_code} "
                                         f"{response.text[:300]}")
                    return response
                return get

            shape = getter(history_path)().json()
            print(f"history: {shape['total']} reports -> {len(shape['points'])} points + "
                  f"{len(shape['buckets'])} buckets, {len(http.get(history_path).content):,} "
                  "bytes")
            history = _timed(getter(history_path), args.requests)
            counts = getter(regressions_path)().json()["counts"]
            print(f"regressions of report {newest}: {counts}")
            regressions = _timed(getter(regressions_path), args.requests)
            page_url = live.url + "/history?" + urlencode({"caseId": case_id, "gpu": gpu})
            draws = page_draw_times(page_url, args.loads)
            report_draws = page_draw_times(f"{live.url}/reports/{newest}", args.loads,
                                           REPORT_DRAWN_JS, chart_count())
        report_model = report_model_times(url, newest, args.requests)

    before, after = bytes_before_after(server, reference)
    results = [
        ("GET /api/v1/history p95", _p95_ms(history), HISTORY_P95_MS, "ms"),
        ("GET .../regressions p95 (a new case)", _p95_ms(regressions), REGRESSIONS_P95_MS,
         "ms"),
        ("history page drawn, first load", draws[0], PAGE_S, "s"),
        ("history page drawn, warm median", statistics.median(draws[1:] or draws), PAGE_S,
         "s"),
        ("report page's read model p95 (cold cache)", _p95_ms(report_model),
         REPORT_MODEL_P95_MS, "ms"),
        ("report page drawn, warm median",
         statistics.median(report_draws[1:] or report_draws), REPORT_PAGE_S, "s"),
        ("bytes per report, now / at 0002", after / before, 0.5, "x"),
    ]
    print(f"bytes per report: at 0002 {before:,.0f}, now {after:,.0f}")
    for name, samples in (("GET /api/v1/history", history), ("GET .../regressions", regressions),
                          ("report page's model", report_model)):
        print(f"{name:<22} p50 {statistics.median(samples) * 1000:6.1f} ms  "
              f"p95 {_p95_ms(samples):6.1f} ms  ({len(samples)} calls)")
    print("load average (1, 5, 15 min): " + ", ".join(f"{v:.1f}" for v in os.getloadavg())
          + f" on {os.cpu_count()} cores")
    ok = True
    for name, value, target, unit in results:
        passed = value < target if unit != "x" else value <= target
        ok = ok and passed
        print(f"{'PASS' if passed else 'FAIL'}: {name} {value:.3g} {unit} "
              f"(target {'<' if unit != 'x' else '<='} {target:g} {unit})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
