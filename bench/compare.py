"""What explaining costs: compare, the regressions' attribution and the case verdict, timed
in process on a series whose newest report has its nine nvfp4 mega cases 18 % slower in the
combine phase (tests/compare_helpers.py).

    .venv/bin/python bench/compare.py [--earlier 20] [--calls 30] [--postgres]

Stores earlier + 1 reports of one series (63 cases each) in a temporary SQLite file, or with
--postgres in a scratch database on the MOESCOPE_TEST_POSTGRES_URL server (created and
dropped here), then times each service call (p50, p95): what a page, the endpoint or the
export waits for before drawing. No target: the figures are for comparing with
bench/history.py's regressions call, which the attribution adds to.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from compare_helpers import combine_slowed  # noqa: E402
from history_helpers import ingest  # noqa: E402
from live import scratch_postgres_database  # noqa: E402
from sqlalchemy import create_engine  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from app.case_view import case_view  # noqa: E402
from app.export.service import export_compare  # noqa: E402
from app.services.comparison import compare_reports  # noqa: E402
from app.services.explain import case_against_history, explain  # noqa: E402
from app.services.history import report_regressions  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from ingest.reference import reference_report_text  # noqa: E402
from ingest.validate import parse_json  # noqa: E402


def _p95_ms(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000


def _timed(call: Callable[[], object], calls: int) -> list[float]:
    for _ in range(3):  # warm the connection and the statement caches
        call()
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    return samples


@contextmanager
def database(postgres: bool) -> Iterator[str]:
    if postgres:
        server = os.environ.get("MOESCOPE_TEST_POSTGRES_URL",
                                "postgresql+psycopg://postgres@127.0.0.1:5432/test")
        with scratch_postgres_database(server, prefix="moescope_bench_compare") as url:
            yield url
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield f"sqlite:///{tmp}/bench.db"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--earlier", type=int, default=20)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args(argv)

    reference = parse_json(reference_report_text())
    bodies, slowed = combine_slowed(reference, args.earlier + 1)
    with database(args.postgres) as url:
        upgrade(url)
        engine = create_engine(url)
        with Session(engine) as session:
            ids = [ingest(session, body) for body in bodies]
        base, head = ids[-2], ids[-1]
        with Session(engine) as session:
            result = report_regressions(session, head)
            case = case_view(next(c for c in bodies[-1]["cases"] if c["id"] == slowed[0]))
            timings = {
                "regressions (verdicts only)": _timed(
                    lambda: report_regressions(session, head), args.calls),
                "regressions + explain": _timed(
                    lambda: explain(session, report_regressions(session, head)), args.calls),
                "explain alone": _timed(lambda: explain(session, result), args.calls),
                "compare_reports (63 cases)": _timed(
                    lambda: compare_reports(session, base, head), args.calls),
                "case verdict (case page)": _timed(
                    lambda: case_against_history(session, head, case), args.calls),
                "compare export (HTML)": _timed(
                    lambda: export_compare(session, base, head), max(5, args.calls // 3)),
            }
        engine.dispose()
    kind = "Postgres" if args.postgres else "SQLite"
    print(f"{kind}: {len(ids)} reports x {len(reference['cases'])} cases, "
          f"{len(result.flagged)} flagged in the newest")
    for name, samples in timings.items():
        print(f"{name:<30} p50 {statistics.median(samples) * 1000:7.1f} ms   "
              f"p95 {_p95_ms(samples):7.1f} ms   ({len(samples)} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
