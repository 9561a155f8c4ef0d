"""POST latency as a day fills up: N reports of the same date, GPU, series and case count,
posted without a runId one after another to a live ``moescope serve`` on Postgres.

    python bench/ingest_flat.py [--posts 500] [--cases 63] [--window 20] [--seed 1]

Each such post is checked against the reports already stored (a whole file posted after
its cases were streamed is the report they grew into), so a check that reads the other
reports makes the day's last posts slower than its first. Target: the median latency of
the last 20 posts within 1.3x of the first 20's. The database is as in ingest_reads.py
(MOESCOPE_BENCH_POSTGRES_URL, else a scratch database on MOESCOPE_TEST_POSTGRES_URL).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import httpx
from ingest_reads import bench_database, empty_tables, ingest_token, serve, synthetic_reports
from sqlalchemy import create_engine

from db.migrate import upgrade

FLAT_TARGET = 1.3


def post_in_turn(url: str, token: str, bodies: list[bytes]) -> list[float]:
    """Seconds of each POST, one client, in order."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    latencies = []
    with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
        http.get("/healthz")
        for body in bodies:
            t0 = time.perf_counter()
            response = http.post("/api/v1/reports", content=body)
            latencies.append(time.perf_counter() - t0)
            if response.status_code != 201:
                raise SystemExit(f"POST failed: {response.status_code} {response.text[:300]}")
    return latencies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--posts", type=int, default=500)
    parser.add_argument("--cases", type=int, default=63)
    parser.add_argument("--window", type=int, default=20, help="posts at each end compared")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    reports = synthetic_reports(args.posts, args.cases, args.seed)
    for report in reports:
        del report["meta"]["runId"]  # the re-post check applies to reports without one
    bodies = [json.dumps(r).encode() for r in reports]

    with bench_database() as database_url:
        upgrade(database_url)
        engine = create_engine(database_url)
        try:
            empty_tables(engine)
        finally:
            engine.dispose()
        token = ingest_token(database_url)
        with serve(database_url, 1) as url:
            latencies = post_in_turn(url, token, bodies)

    first = statistics.median(latencies[:args.window]) * 1e3
    last = statistics.median(latencies[-args.window:]) * 1e3
    ratio = last / first
    print(f"{args.posts} same-day posts without a runId, {args.cases} cases each, one client:")
    print(f"  median of the first {args.window}: {first:.1f} ms; of the last {args.window}: "
          f"{last:.1f} ms; all: {statistics.median(latencies) * 1e3:.1f} ms")
    tenth = max(1, args.posts // 10)
    print("  median of each tenth: " + ", ".join(
        f"{statistics.median(latencies[i:i + tenth]) * 1e3:.0f}"
        for i in range(0, len(latencies), tenth)) + " ms")
    ok = ratio <= FLAT_TARGET
    print(f"  last / first = {ratio:.2f} (target <= {FLAT_TARGET})  {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
