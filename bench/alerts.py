"""Alerts at scale on Postgres: the alerts of a new report, and a full rebuild.

    .venv/bin/python bench/alerts.py [--reports 10000] [--samples 40]

1. Loads ``--reports`` reports of the reference's series (63 cases each) into a scratch
   database on the MOESCOPE_TEST_POSTGRES_URL server, in bulk with SQL (COPY), not through
   the API: bench/history.py's loader (200 distinct reports through ingest's own code,
   cycled with their own dates and run ids). Ingesting 10,000 reports one by one takes
   too long on a small box for a benchmark.
2. A new report, ingested through the service (``ingest_report``, alerts included), then
   its alerts opened again on their own (``open_alerts``: detection over each case's tail,
   grouping, the why, the store), ``--samples`` times, each rolled back: p95 of both.
   Then the same with the newest five reports 20 % slower in nine cases, so that the new
   report tells a change (an alert is built and stored).
3. ``moescope alerts rebuild``'s work (``alert_rebuild.rebuild``): every series recomputed,
   timed once (rolled back).

Targets: alerts for a new report p95 <= 200 ms; a full rebuild <= 2 minutes. Prints the
figures and PASS/FAIL.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

from compare_helpers import nvfp4_mega, slow_down  # noqa: E402
from history import load  # noqa: E402  (bench/history.py)
from history_helpers import synthetic_series  # noqa: E402
from live import scratch_postgres_database  # noqa: E402
from sqlalchemy import create_engine  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from app.services.alert_rebuild import rebuild  # noqa: E402
from app.services.alerts import alerts_of, open_alerts  # noqa: E402
from app.services.reports import ingest_report  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from ingest.reference import reference_report_text  # noqa: E402
from ingest.validate import parse_json, validate_report  # noqa: E402

NEW_REPORT_P95_MS = 200.0
REBUILD_S = 120.0
LAST = date(2027, 1, 1)


def _p95_ms(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000


def _new_reports(reference: dict[str, Any], count: int, stepped: bool) -> list[dict[str, Any]]:
    """``count`` reports after the loaded ones; ``stepped``: nine cases 20 % slower."""
    bodies = synthetic_series(reference, count, seed=21)
    for i, body in enumerate(bodies):
        body["meta"]["date"] = (LAST + timedelta(days=i)).isoformat()
        body["meta"]["runId"] = f"bench-new-{stepped}-{i}"
        if stepped:
            for case in body["cases"]:
                if case["id"] in nvfp4_mega(body):
                    slow_down(case, 0.2 * case["layerMS"])
    return bodies


def _sample(session: Session, before: list[dict[str, Any]], body: dict[str, Any]
            ) -> tuple[float, float, int]:
    """Ingest ``before`` then ``body`` (timed: the ingest, then its alerts alone), roll back."""
    try:
        for earlier in before:
            ingest_report(session, earlier, validate_report(earlier))
        t0 = time.perf_counter()
        report_id = ingest_report(session, body, validate_report(body)).id
        t1 = time.perf_counter()
        open_alerts(session, report_id)  # again: those it opened are rebuilt, not added
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, len(alerts_of(session, report_ids=[report_id]))
    finally:
        session.rollback()


def time_new_report(session: Session, reference: dict[str, Any], samples: int,
                    stepped: bool) -> tuple[list[float], list[float], int]:
    # A step is told by its fifth report (min_segment): the new one.
    bodies = _new_reports(reference, 5, stepped)
    ingest_s, alerts_s, told = [], [], 0
    for n in range(samples + 3):
        body = copy.deepcopy(bodies[-1])
        body["meta"]["runId"] += f"-{n}"
        total, alone, opened = _sample(session, bodies[:-1], body)
        if n >= 3:  # the first runs warm the caches
            ingest_s.append(total)
            alerts_s.append(alone)
            told += opened
    return ingest_s, alerts_s, told


def _timed_once(call: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=40)
    args = parser.parse_args(argv)
    server = os.environ.get("MOESCOPE_TEST_POSTGRES_URL",
                            "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    reference = parse_json(reference_report_text())
    ok = True
    with scratch_postgres_database(server, prefix="moescope_bench") as url:
        upgrade(url)
        engine = create_engine(url)
        t0 = time.perf_counter()
        load(engine, reference, args.reports)
        print(f"loaded {args.reports} reports of {len(reference['cases'])} cases in bulk "
              f"(SQL COPY) in {time.perf_counter() - t0:.0f} s")
        with Session(engine) as session:
            for stepped in (False, True):
                ingest_s, alerts_s, told = time_new_report(session, reference, args.samples,
                                                           stepped)
                p95 = _p95_ms(alerts_s)
                ok &= p95 <= NEW_REPORT_P95_MS
                what = "a step told" if stepped else "nothing moved"
                print(f"new report ({what}, {told // len(alerts_s)} alert(s) each): alerts "
                      f"p95 {p95:.0f} ms (target <= {NEW_REPORT_P95_MS:.0f}), whole ingest "
                      f"with them p95 {_p95_ms(ingest_s):.0f} ms, {len(alerts_s)} samples")
            try:
                seconds = _timed_once(lambda: rebuild(session))
            finally:
                session.rollback()
        ok &= seconds <= REBUILD_S
        print(f"full rebuild of {args.reports} reports: {seconds:.1f} s "
              f"(target <= {REBUILD_S:.0f} s)")
        engine.dispose()
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
