"""HTML export speed and size: the reference report (63 cases) and a synthetic report of
5,000 cases, exported in this process (reading Postgres, cold: the dashboard's report cache
emptied first) and through the CLI (`moescope export`, a fresh interpreter).

Targets: the reference under 2 s in process and 1.2 s as a whole `moescope export`
process (interpreter start-up and imports included; `moescope --help` is printed beside it
as the floor), and under 6 MB; 5,000 cases under 10 s. Prints the figures (medians) and
PASS/FAIL. Run it without `nice`: the whole-process figure is wall clock.

    MOESCOPE_BENCH_POSTGRES_URL=postgresql+psycopg://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/export.py [--runs 3] [--cases 5000]

The URL names an existing database used only to create (and drop) a scratch database.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO / "tests"))  # live.py: a server process, a scratch database
TIME_TARGET_S = {"reference": 2.0, "synthetic": 10.0}
CLI_TARGET_S = {"reference": 1.2, "synthetic": 10.0}
SIZE_TARGET_MB = {"reference": 6.0}


def dashboard_bench() -> ModuleType:
    """bench/dashboard.py, for its reports (the same synthetic report for both benches)."""
    path = REPO / "bench" / "dashboard.py"
    spec = importlib.util.spec_from_file_location("bench_dashboard", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_process_s(url: str, report_id: int, runs: int) -> tuple[list[float], int]:
    """Seconds of each of ``runs`` exports (the first also reads the plotly.js bundle and
    compiles the templates), and the file's size in bytes."""
    from sqlalchemy.orm import Session

    from app.case_fields import CaseFilter
    from app.core.db import engine_for
    from app.export.service import export_report

    times, size = [], 0
    for _ in range(runs):
        with Session(engine_for(url)) as session:
            start = time.perf_counter()
            html = export_report(session, report_id, CaseFilter()).html
            times.append(time.perf_counter() - start)
        size = len(html.encode("utf-8"))
    return times, size


def cli_s(url: str, report_id: int, runs: int, out: Path) -> float:
    """Median wall seconds of ``moescope export``, interpreter start-up included."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cli", "export", str(report_id),
                        "--database-url", url, "-o", str(out)],
                       check=True, cwd=REPO, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def help_s(runs: int) -> float:
    """Median wall seconds of ``moescope --help``: start-up and the parser's imports."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cli", "--help"], check=True, cwd=REPO,
                       capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="exports per measurement")
    parser.add_argument("--cases", type=int, default=None, help="synthetic report size")
    args = parser.parse_args()
    from live import scratch_postgres_database

    from db.migrate import upgrade

    bench = dashboard_bench()
    cases = args.cases or bench.SYNTHETIC_CASES
    admin = os.environ.get("MOESCOPE_BENCH_POSTGRES_URL",
                           "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    failures = 0
    with scratch_postgres_database(admin, prefix="moescope_bench_export") as url, \
            tempfile.TemporaryDirectory() as tmp:
        upgrade(url)
        ids = {"reference": bench.ingest(url, bench.reference_report()),
               "synthetic": bench.ingest(url, bench.synthetic_report(cases))}
        print(f"Postgres scratch database; synthetic report: {cases} cases; "
              f"median of {args.runs} runs; `moescope --help` {help_s(args.runs):.2f} s")
        for name, rid in ids.items():
            times, size = in_process_s(url, rid, args.runs)
            seconds = max(times)
            command = cli_s(url, rid, args.runs, Path(tmp) / f"{name}.html")
            target = TIME_TARGET_S[name]
            size_mb = size / 1e6
            ok = seconds < target and command <= CLI_TARGET_S[name]
            size_ok = size_mb < SIZE_TARGET_MB.get(name, float("inf"))
            failures += (not ok) + (not size_ok)
            size_target = (f" (target < {SIZE_TARGET_MB[name]:g} MB) {bench.verdict(size_ok)}"
                           if name in SIZE_TARGET_MB else "")
            print(f"[{name}] export in process: first {times[0]:.2f} s, median "
                  f"{statistics.median(times):.2f} s (target < {target:g} s); whole "
                  f"`moescope export` process {command:.2f} s (target <= "
                  f"{CLI_TARGET_S[name]:g} s) {bench.verdict(ok)}; "
                  f"file {size_mb:.2f} MB{size_target}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
