"""Per case of a runner report: layer time and window spread, useful TFLOP/s and % of
the measured bf16 ceiling (and of the datasheet peak where the report has one), the
per-phase times and bandwidths, numerics against the bound, the graph check, the memory
peak, the GPU state NVML sampled over the timed windows, the expert kernel that ran, the
iteration tails (p50/p90/p99) and the set-up time.

usage: python bench/gpu_check_summary.py CEILING.json REPORT.json [REPORT.json ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from ingest.derived import measured_ceiling_for
from ingest.schema import Case, Meta


def _spread(windows: list[float]) -> float:
    return (max(windows) - min(windows)) / statistics.median(windows) * 100


def _gpu_state(case: dict[str, Any]) -> str:
    state = case.get("gpuState")
    if not state:
        return f"gpuState null: {case.get('gpuStateReason')}"
    median = state.get("smClockMedianMHz")
    return (f"gpuState SM {state['smClockMinMHz']:.0f}-{state['smClockMaxMHz']:.0f} MHz "
            f"(median {'-' if median is None else f'{median:.0f}'}), "
            f"<= {state['powerMaxW']:.0f} W, <= {state['temperatureMaxC']:.0f} C, reasons "
            f"{state.get('throttleReasonNames') or '-'}, power capped "
            f"{state.get('powerCapped')}, clocks locked {state.get('clocksLocked')} "
            f"({state['samples']} samples)")


def _kernel_and_tails(case: dict[str, Any]) -> str:
    tails = (case.get("iterationMS") or {}).get("combined")
    tail = (f"iterations p50 {tails['p50']:.4f} p90 {tails['p90']:.4f} p99 "
            f"{tails['p99']:.4f} ms" if tails else "iterationMS null")
    setup, compiled = case.get("setupS"), case.get("compileS")
    compiling = ("" if compiled is None else
                 f" (compiling {compiled:.1f} s, {case.get('compiledGraphs')} graphs)")
    return (f"expert kernel {case.get('expertKernel') or '-'}; {tail}; set-up "
            f"{'-' if setup is None else f'{setup:.1f} s'}{compiling}")


def _phases(case: dict[str, Any]) -> str:
    phases = case.get("phaseMS")
    if not phases:
        return "phaseMS null"
    gbps = {k: "-" if case.get(k) is None else f"{case[k]:.1f}"
            for k in ("dispatchGBps", "combineGBps")}
    line = (f"phaseMS {' '.join(f'{k} {v:.4f}' for k, v in phases.items())} (graphs "
            f"{case.get('phaseGraphs')}); remote-bytes GB/s dispatch {gbps['dispatchGBps']}, "
            f"combine {gbps['combineGBps']}")
    if case.get("phaseSumMS") is not None:
        line += (f"\n  phase sum {case['phaseSumMS']:.4f} ms vs layer forward "
                 f"{case['forwardMS']:.4f} ms: gap {case['phaseGapMS']:+.4f} ms "
                 f"({case['phaseGapPercent']:+.1f} %)")
    if case.get("backwardPhaseSumMS") is not None:
        line += (f"; backward sum {case['backwardPhaseSumMS']:.4f} ms vs "
                 f"{case['backwardMS']:.4f} ms: gap {case['backwardPhaseGapPercent']:+.1f} %")
    return line


def _of_measured_ceiling(meta: dict[str, Any], case: dict[str, Any]) -> str:
    """% of the run's own grouped-GEMM ceiling at the case's shape (meta.measuredCeilings),
    derived as the service derives it."""
    tf = measured_ceiling_for(Meta.model_validate(meta), Case.model_validate(case))
    if tf is None:
        return "no measured grouped ceiling"
    return (f"{100 * case['usefulTFPerGPU'] / tf:.1f} % of the measured grouped ceiling "
            f"({tf:.4g} TF/s)")


def summarize(report: dict[str, Any], measured: float) -> None:
    meta = report["meta"]
    peaks = meta.get("theoreticalTFPerGPU") or {}
    shape = meta["shape"]
    print(f"-- {meta['gpu']}, T={shape['T']} D={shape['D']} E={shape['E']} K={shape['K']}, "
          f"ep1Group {meta.get('ep1Group')}; datasheet bf16 {peaks.get('bf16', '-')}")
    for case in report["cases"]:
        tf = case["usefulTFPerGPU"]
        peak = peaks.get(case["precision"])
        of_peak = f"{100 * tf / peak:.1f} %" if peak and not case.get("emulated") else "-"
        error, bound = case.get("numericalRelativeError"), case.get("numericalBound")
        numerics = f"{error:.2e} vs bound {bound:g}" if error is not None else "not measured"
        peak_gib = case.get("allocatedPeakGiB")
        print(f"{case['id']}\n  layer {case['layerMS']:.4f} ms (spread "
              f"{_spread(case['windows']['combined']):.1f} %), {tf:.4g} useful TF/s = "
              f"{100 * tf / measured:.1f} % of the measured ceiling, {of_peak} of peak; "
              f"numerics {numerics} ({case.get('numericalAccepted')}); graphAccepted "
              f"{case.get('graphAccepted')}; allocated peak "
              f"{'-' if peak_gib is None else f'{peak_gib:.2f} GiB'}; ooms "
              f"{case.get('ooms', 0)}; emulated {case.get('emulated', False)}")
        print(f"  {_of_measured_ceiling(meta, case)}")
        print(f"  {_phases(case)}\n  {_gpu_state(case)}; NVLink TX "
              f"{case.get('nvlinkTXGBps')} RX {case.get('nvlinkRXGBps')} GB/s")
        print(f"  {_kernel_and_tails(case)}")
        for key in ("failure", "graphNote", "oomNote", "runtimeSkipped"):
            if case.get(key):
                print(f"  {key}: {case[key]}")
    for key in ("skippedNote", "runtimeSkippedNote", "graphNote", "bandwidthNote",
                "measuredCeilingNote", "peakNote"):
        if meta.get(key):
            print(f"{key}: {meta[key]}")


def main(ceiling_path: str, *reports: str) -> int:
    ceiling = json.loads(Path(ceiling_path).read_text().strip().splitlines()[-1])
    measured = float(ceiling["bf16TFLOPs"])
    print(f"measured bf16 GEMM ceiling {measured:.1f} TFLOP/s (n={ceiling['n']}, same run)")
    for path in reports:
        summarize(json.loads(Path(path).read_text()), measured)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
