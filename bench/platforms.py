"""Platforms speed (issue 25) against a live ``moescope serve`` on Postgres.

1. Eight reports of 63 cases (the reference under eight GPU names, throughput scaled per
   GPU), ingested through the service. The /platforms page, opened without arguments (the
   newest report of each GPU: these eight), is loaded in headless Chromium in turn with a
   static plotly page of the same figures (the same specs from the same builders, the
   page's plotly.js bundle, nothing else); each timed from navigation start to every chart
   drawn (the page's winner matrix is built by static/platforms_matrix.js alongside).
   Target: page <= 1.1 x static (warm medians).
2. Then 9,992 more report rows are bulk-inserted with SQL (INSERT ... SELECT over
   generate_series, copies of the first report's row, older, spread over the eight GPUs,
   no case rows: the platforms API reads only the picked reports' cases), 10,000 stored
   reports in all. GET /api/v1/platforms (the default pick) and
   GET /api/v1/platforms?reports=<the eight> over HTTP: target p95 < 50 ms.

    MOESCOPE_BENCH_POSTGRES_URL=postgresql+psycopg://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/platforms.py [--loads 6] [--calls 200]

The URL names an existing database used only to create (and drop) a scratch database.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "tests")]

from dashboard import (  # noqa: E402
    _chromium,
    ingest,
    percentiles,
    reference_report,
    write_static_page,
)
from history import DRAWN_JS  # noqa: E402

GPUS = ("GB300 NVL72", "B300", "B200", "GB200 NVL72", "H200", "H100", "MI355X", "MI300X")
STORED = 10_000
STATIC_RATIO_TARGET = 1.1
API_P95_TARGET_MS = 50.0

def platform_report(index: int) -> dict[str, Any]:
    report = reference_report()
    report["meta"]["gpu"] = f"NVIDIA {GPUS[index]}"
    report["meta"]["date"] = f"2026-10-{10 + index:02d}"
    scale = 0.4 + 0.15 * index
    for case in report["cases"]:
        if case.get("usefulTFPerGPU") is not None:
            case["usefulTFPerGPU"] *= scale
    return copy.deepcopy(report)


def static_page(database_url: str, path: Path) -> tuple[Path, int]:
    """The platforms page's figures for the default pick, drawn by plotly.js alone."""
    from app.core.db import session_scope
    from app.export.platforms import charts
    from app.services.platforms import platforms_page

    with session_scope(database_url) as session:
        specs = list(charts(platforms_page(session, None)).values())
    # As the page draws them: at the window's width, not the export's fixed 1000 px.
    specs = [{"data": f["data"], "layout": {k: v for k, v in f["layout"].items()
                                            if k != "width"}} for f in specs]
    write_static_page(specs, path)
    return path, len(specs)


def paired_draw_times(base_url: str, static: Path, charts: int, loads: int
                      ) -> tuple[list[float], list[float]]:
    driver = _chromium()
    try:
        page, plain = [], []
        for _ in range(loads):
            driver.get(f"{base_url}/platforms")
            page.append(float(driver.execute_async_script(DRAWN_JS, charts)))
            driver.get(static.as_uri())
            plain.append(float(driver.execute_async_script(DRAWN_JS, charts)))
        return page, plain
    finally:
        driver.quit()


def bulk_insert(database_url: str, count: int) -> float:
    """``count`` copies of the first report's row, older than every real report; seconds."""
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)
    t0 = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(text("""
            INSERT INTO reports (content_sha256, current_sha256, run_id, date, gpu, series,
                provenance, source, meta, extra, body, case_count, best_percent_of_peak,
                data_error_count, created_at, updated_at)
            SELECT md5('bulk' || i) || md5('copy' || i), md5('bulk' || i) || md5('copy' || i),
                   NULL, '2025-01-01',
                   'NVIDIA ' || (ARRAY[:g0, :g1, :g2, :g3, :g4, :g5, :g6, :g7])[1 + i % 8],
                   r.series, r.provenance, r.source, r.meta, r.extra, r.body, r.case_count,
                   r.best_percent_of_peak, r.data_error_count,
                   r.created_at - make_interval(days => 1, secs => i),
                   r.updated_at - make_interval(days => 1, secs => i)
            FROM generate_series(1, :count) AS i,
                 (SELECT * FROM reports ORDER BY id LIMIT 1) AS r
        """), {"count": count, **{f"g{k}": g for k, g in enumerate(GPUS)}})
        conn.execute(text("ANALYZE reports"))
    engine.dispose()
    return time.perf_counter() - t0


def api_times(url: str, calls: int) -> list[float]:
    with httpx.Client(timeout=30) as client:
        for _ in range(5):
            client.get(url).raise_for_status()
        samples = []
        for _ in range(calls):
            t0 = time.perf_counter()
            client.get(url).raise_for_status()
            samples.append((time.perf_counter() - t0) * 1000)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loads", type=int, default=6, help="page loads (the first is cold)")
    parser.add_argument("--calls", type=int, default=200, help="API calls per URL")
    args = parser.parse_args()
    from live import scratch_postgres_database, serve_process

    admin = os.environ.get("MOESCOPE_BENCH_POSTGRES_URL",
                           "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    failures = 0
    with scratch_postgres_database(admin, prefix="moescope_bench_platforms") as url, \
            tempfile.TemporaryDirectory() as tmp:
        os.environ["MOESCOPE_DATABASE_URL"] = url
        from db.migrate import upgrade

        upgrade(url)
        ids = [ingest(url, platform_report(i)) for i in range(len(GPUS))]
        static, charts = static_page(url, Path(tmp) / "static.html")
        with serve_process(url, Path(tmp) / "server.log") as server:
            page, plain = paired_draw_times(server.url, static, charts, args.loads)
            page_s, plain_s = statistics.median(page[1:]), statistics.median(plain[1:])
            ratio = page_s / plain_s
            ok = ratio <= STATIC_RATIO_TARGET
            failures += not ok
            print(f"/platforms, {len(ids)} reports x 63 cases: {charts} charts drawn in "
                  f"{page_s / 1000:.2f} s (warm median of {len(page) - 1}); "
                  f"static plotly page of the same figures: {plain_s / 1000:.2f} s; ratio "
                  f"{ratio:.2f} (target <= {STATIC_RATIO_TARGET}) "
                  f"{'PASS' if ok else 'FAIL'}")
            seconds = bulk_insert(url, STORED - len(ids))
            print(f"bulk-inserted {STORED - len(ids):,} report rows with SQL in {seconds:.1f} s "
                  f"({STORED:,} stored reports)")
            picked = ",".join(map(str, ids))
            for label, path in (("default pick", "/api/v1/platforms"),
                                ("reports=<8 ids>", f"/api/v1/platforms?reports={picked}")):
                p50, p95 = percentiles(api_times(server.url + path, args.calls))
                ok = p95 < API_P95_TARGET_MS
                failures += not ok
                print(f"GET {label}: p50 {p50:.1f} ms, p95 {p95:.1f} ms over {args.calls} "
                      f"calls (target p95 < {API_P95_TARGET_MS:g} ms) "
                      f"{'PASS' if ok else 'FAIL'}")
        from app.core.db import engine_for

        engine_for(url).dispose()
    print("ALL PASS" if failures == 0 else f"{failures} FAIL")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
