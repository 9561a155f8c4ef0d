"""Where a matrix's wall time goes: set-up and compile against timed time, per case and
in all.

    .venv/bin/python bench/setup_time.py [--nproc 2] [--windows 10] [--iterations 5] [--mega]

Runs a small CPU matrix (``moescope run --nproc 2``: gloo ranks, written to ``--out``, no
server) and prints per case its ``setupS`` (start to the first timed window: weights,
quantization, routing, graph capture and compilation, the first warm-up), its
``compileS`` (of set-up and the rest: torch.compile's own account; "-" where nothing is
compiled), its timed time (every timed iteration: windows x iterations x the window mean,
per kind of window), the rest of the case (``wallS`` minus set-up and timed: the other
warm-ups, the phase pass, the float32 reference) and ``wallS``; then the same summed over
the cases against the run's own wall time (which adds process start-up, the probes,
rendezvous, and gathering and writing each case). ``--mega``: the mega pipeline instead,
compiled on the CPU (``MOESCOPE_COMPILE_ON_CPU=1``), two imbalances per shape, so the
second case of each shape shows the compiled layer reused. CPU figures: they show where
set-up goes, not GPU speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
AXES = {
    "default": 'precision = ["bf16", "mxfp8"]\npipeline = ["standard", "staged"]\nimbalance = [1]',
    "mega": 'precision = ["mxfp8"]\npipeline = ["mega"]\nimbalance = [1, 1.5]',
}

MATRIX = """seed = 0
[shape]
T = 64
D = 256
E = 8
K = 2
[matrix]
mode = ["inference", "training"]
ep = [2]
{axes}
F = [512]
category = "setup_bench"
[timing]
windows = {windows}
iterations = {iterations}
warmup = 2
warmup_ms = 50
"""


def timed_s(case: dict[str, Any], iterations: int) -> float:
    """Seconds inside the timed windows: combined (inference: also the forward, which is
    the same pass) plus, for training, the forward and backward windows timed apart."""
    kinds = ["combined"] if case["mode"] == "inference" else ["combined", "forward",
                                                               "backward"]
    return sum(sum(case["windows"][k]) for k in kinds if k in case["windows"]) \
        * iterations / 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--mega", action="store_true",
                        help="the mega pipeline, compiled on the CPU, two imbalances a shape")
    args = parser.parse_args()
    env = {**os.environ, "MOESCOPE_URL": ""}
    if args.mega:
        env["MOESCOPE_COMPILE_ON_CPU"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        matrix, out = Path(tmp) / "matrix.toml", Path(tmp) / "report.json"
        matrix.write_text(MATRIX.format(windows=args.windows, iterations=args.iterations,
                                         axes=AXES["mega" if args.mega else "default"]))
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "cli", "run", "--matrix", str(matrix), "--nproc",
             str(args.nproc), "--out", str(out), "--spool", str(Path(tmp) / "spool")],
            cwd=REPO, capture_output=True, text=True,
            env=env)
        run_s = time.perf_counter() - start
        if result.returncode != 0:
            print(result.stdout + result.stderr, file=sys.stderr)
            return result.returncode
        report = json.loads(out.read_text())
    cases = report["cases"]
    print(f"{'case':<44} {'setupS':>8} {'compileS':>8} {'timedS':>8} {'otherS':>8} "
          f"{'wallS':>8}")
    totals = [0.0, 0.0, 0.0, 0.0]
    for case in cases:
        setup, timed, wall = case["setupS"], timed_s(case, args.iterations), case["wallS"]
        compiled = case.get("compileS")
        shown = "-" if compiled is None else f"{compiled:.2f}"
        print(f"{case['id']:<44} {setup:8.2f} {shown:>8} {timed:8.2f} "
              f"{wall - setup - timed:8.2f} {wall:8.2f}")
        totals = [totals[0] + setup, totals[1] + (compiled or 0.0), totals[2] + timed,
                  totals[3] + wall]
    setup, compiled, timed, wall = totals
    print(f"{'all ' + str(len(cases)) + ' cases':<44} {setup:8.2f} {compiled:8.2f} "
          f"{timed:8.2f} {wall - setup - timed:8.2f} {wall:8.2f}")
    print(f"run wall time {run_s:.2f} s: cases {wall:.2f} s ({wall / run_s:.0%}), of which "
          f"set-up {setup:.2f} s ({setup / run_s:.0%}; compiling {compiled:.2f} s) and "
          f"timed {timed:.2f} s ({timed / run_s:.0%}); outside the cases (process start-up "
          f"and imports, the probes, rendezvous, gathering, checking and writing each case) "
          f"{run_s - wall:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
