"""Regressions of a 63-case report against 200 earlier reports of the same series, on
Postgres: GET /api/v1/reports/{id}/regressions timed against a live ``moescope serve``.

    .venv/bin/python bench/history.py [--earlier 200] [--requests 50] [--seed 0]

1. Stores 200 + 1 reports of one series (the reference report, each case's times moved by
   seeded noise within its own window spread, one day apart) in a scratch database on the
   MOESCOPE_TEST_POSTGRES_URL server (created and dropped here).
2. Times the endpoint over HTTP on loopback (what a client waits: an upper bound of the
   server's time) and the service call in this process (the server's own work).

Target: p95 under 300 ms. Prints the figures and PASS/FAIL.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from history_helpers import ingest, synthetic_series  # noqa: E402
from live import scratch_postgres_database, serve_process  # noqa: E402
from sqlalchemy import create_engine  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from app.services.history import report_regressions  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from ingest.reference import reference_report_text  # noqa: E402
from ingest.validate import parse_json  # noqa: E402

TARGET_P95_MS = 300.0


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--earlier", type=int, default=200)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    server = os.environ.get("MOESCOPE_TEST_POSTGRES_URL",
                            "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    reference = parse_json(reference_report_text())
    reports = synthetic_series(reference, args.earlier + 1, seed=args.seed)
    with scratch_postgres_database(server, prefix="moescope_bench") as url:
        upgrade(url)
        engine = create_engine(url)
        t0 = time.perf_counter()
        with Session(engine) as session:
            ids = [ingest(session, report) for report in reports]
        print(f"stored {len(ids)} reports x {len(reference['cases'])} cases "
              f"in {time.perf_counter() - t0:.1f} s")
        newest = ids[-1]

        with Session(engine) as session:
            result = report_regressions(session, newest)
            points = {item.verdict.baseline_points for item in result.items}
            print(f"report {newest}: {len(result.items)} cases judged against "
                  f"{sorted(points)} earlier point(s) each, {len(result.flagged)} flagged")
            in_process = _timed(lambda: report_regressions(session, newest), args.requests)
        engine.dispose()

        with tempfile.TemporaryDirectory() as tmp, serve_process(
            url, Path(tmp) / "server.log", ready_path="/readyz"
        ) as live, httpx.Client(base_url=live.url, timeout=30) as http:
            path = f"/api/v1/reports/{newest}/regressions"

            def get() -> None:
                response = http.get(path)
                if response.status_code != 200:
                    raise SystemExit(f"GET {path}: {response.status_code} {response.text[:300]}")

            over_http = _timed(get, args.requests)

    for name, samples in (("service call, in process", in_process),
                          ("GET .../regressions over HTTP", over_http)):
        print(f"{name:<32} p50 {statistics.median(samples) * 1000:7.1f} ms   "
              f"p95 {_p95_ms(samples):7.1f} ms   ({len(samples)} calls)")
    ok = _p95_ms(over_http) < TARGET_P95_MS
    print(f"{'PASS' if ok else 'FAIL'}: HTTP p95 {_p95_ms(over_http):.1f} ms "
          f"(target < {TARGET_P95_MS:.0f} ms)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
