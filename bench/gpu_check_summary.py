"""Per case of a runner report: useful TFLOP/s per GPU and % of the measured bf16 ceiling
(and of the datasheet peak where the report has one).

usage: python bench/gpu_check_summary.py REPORT.json CEILING.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(report_path: str, ceiling_path: str) -> int:
    report = json.loads(Path(report_path).read_text())
    ceiling = json.loads(Path(ceiling_path).read_text().strip().splitlines()[-1])
    measured = float(ceiling["bf16TFLOPs"])
    peaks = report["meta"].get("theoreticalTFPerGPU") or {}
    print(f"device {report['meta']['gpu']}; measured bf16 GEMM ceiling {measured:.1f} TFLOP/s "
          f"(n={ceiling['n']}); datasheet bf16 {peaks.get('bf16', '-')}")
    print(f"{'case':<52} {'layer ms':>9} {'useful TF':>10} {'% ceil':>7} {'% peak':>7} "
          f"{'numerics':>9} {'graph':>6} {'ooms':>4} emulated")
    for case in report["cases"]:
        tf = case["usefulTFPerGPU"]
        peak = peaks.get(case["precision"])
        pct_peak = f"{100 * tf / peak:6.1f}" if peak and not case.get("emulated") else "     -"
        error = case.get("numericalRelativeError")
        numerics = f"{error:>9.2e}" if error is not None else f"{'-':>9}"
        print(f"{case['id']:<52} {case['layerMS']:>9.3f} {tf:>10.4g} "
              f"{100 * tf / measured:>7.1f} {pct_peak:>7} "
              f"{numerics} {str(case['graphAccepted']):>6} {case.get('ooms', 0):>4} "
              f"{case.get('emulated', False)}")
        for key in ("graphNote", "oomNote", "runtimeSkipped"):
            if case.get(key):
                print(f"  {key}: {case[key]}")
    for key, value in report["meta"].items():
        if key in ("skippedNote", "runtimeSkippedNote", "graphNote"):
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
