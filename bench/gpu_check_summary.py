"""Per case of a runner report: layer time and window spread, useful TFLOP/s and % of
the measured bf16 ceiling (and of the datasheet peak where the report has one), the
per-phase times and bandwidths, numerics against the bound, the graph check, the memory
peak, the GPU state NVML sampled over the timed windows, the expert kernel that ran, the
iteration tails (p50/p90/p99) and the set-up time. Then the verdicts, one PASS, FAIL or
SKIP line each, printed whatever is missing (a step that failed or timed out leaves its
file out, and the lines that needed it say FAIL): every step of bench/gpu_check.sh, the
grouped GEMM used, the expert kernel named, graphs accepted, phase graphs, 0 < % of the
measured grouped ceiling <= 100, fp8 native, and the profiler's CUTLASS grouped GEMMs,
NCCL kernels and no device-to-host copy inside the step.

usage: python bench/gpu_check_summary.py OUT_DIR   (steps.tsv, ceiling.json, profile.json,
       and the reports report.json, decode.json, mega.json, where present)
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from ingest.derived import measured_ceiling_for, observed_imbalance
from ingest.schema import Case, Meta

REPORTS = ("report.json", "decode.json", "mega.json")
TIMED_OUT = (124, 137)  # timeout's own exit codes (SIGTERM sent; SIGKILL after -k)


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
    for view, gap, label in (("inLayerPhaseMS", "inLayerPhaseGapMS", "in-layer"),
                             ("inLayerBackwardPhaseMS", "inLayerBackwardPhaseGapMS",
                              "in-layer backward")):
        inside = case.get(view)
        if inside:  # the layer's own step (runner.phase_clock): gap < 0 is overlap
            line += (f"\n  {label} {' '.join(f'{k} {v:.4f}' for k, v in inside.items())}: "
                     f"gap {case[gap]:+.4f} ms")
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


def _load(path: Path, last_line: bool = False) -> Any:
    """The JSON in ``path`` (``last_line``: on its last line), None where a step left none."""
    try:
        text = path.read_text().strip()
        return json.loads(text.splitlines()[-1] if last_line else text)
    except (OSError, ValueError, IndexError):
        return None


def _verdict(ok: bool | None, name: str, detail: str) -> str:
    return f"{'SKIP' if ok is None else 'PASS' if ok else 'FAIL'} {name}: {detail}"


def step_verdicts(steps_tsv: Path) -> list[str]:
    lines = []
    for row in (steps_tsv.read_text().splitlines() if steps_tsv.exists() else []):
        name, rc, took, limit = row.split("\t")
        why = (f"timed out after {limit} s" if int(rc) in TIMED_OUT else
               f"exit {rc} after {took} s" if int(rc) else f"{took} s of {limit} s")
        lines.append(_verdict(int(rc) == 0, f"step {name}", why))
    return lines or [_verdict(False, "steps", f"no {steps_tsv.name}")]


def case_verdicts(reports: list[dict[str, Any]], cuda: bool) -> list[str]:
    cases = [c for r in reports for c in r["cases"]]
    if not cases:
        return [_verdict(False, "cases", "no report holds a case (see the steps above)")]
    grouped = all(r["meta"]["host"].get("groupedMM") for r in reports)
    bf16 = [c for c in cases if c["precision"] == "bf16"]
    used = [c["id"] for c in bf16 if "grouped" not in (c.get("expertKernel") or "")]
    lines = [
        _verdict(grouped and not used, "grouped GEMM used",
                 f"probe {grouped}; bf16 cases without it: {used or 'none'}"),
        _verdict(all(c.get("expertKernel") for c in cases), "expert kernel",
                 ", ".join(sorted({str(c.get("expertKernel")) for c in cases}))),
    ]
    for key, name in (("graphAccepted", "graphs accepted"), ("phaseGraphs", "phase graphs")):
        bad = [c["id"] for c in cases if c.get(key) is not True]
        lines.append(_verdict(None, name, "no CUDA graphs on the CPU") if not cuda else
                     _verdict(not bad, name, f"not on: {bad or 'none'}"))
    lines.append(_ceiling_verdict(reports, cuda))
    lines.append(_fp8_verdict(cases, cuda))
    return lines


def _ceiling_verdict(reports: list[dict[str, Any]], cuda: bool) -> str:
    shares, missing = [], []
    for report in reports:
        meta = Meta.model_validate(report["meta"])
        for case in report["cases"]:
            tf = measured_ceiling_for(meta, Case.model_validate(case))
            if tf is None:
                missing.append(case["id"])
            else:  # the busiest rank's rate, as the ceiling is measured at its shapes
                hot = observed_imbalance(case["receiveRows"]) or 1.0
                shares.append((case["id"], 100 * case["usefulTFPerGPU"] * hot / tf))
    bad = [f"{i} {p:.1f} %" for i, p in shares if not 0 < p <= 100]
    detail = (f"{len(shares)} case(s) from {min(p for _, p in shares):.1f} to "
              f"{max(p for _, p in shares):.1f} %" if shares else "no case has one")
    detail = f"{detail}; outside: {bad or 'none'}; no ceiling: {missing or 'none'}"
    if not cuda:  # wall-clock ceilings and cases on shared cores: no bound holds
        return _verdict(None, "0 < % of measured ceiling <= 100", f"CPU run, {detail}")
    return _verdict(bool(shares) and not bad, "0 < % of measured ceiling <= 100", detail)


def _fp8_verdict(cases: list[dict[str, Any]], cuda: bool) -> str:
    from runner.spec import PRECISIONS  # what this checkout's runner offers, at run time

    if "fp8" not in PRECISIONS:
        return _verdict(None, "fp8 native", "fp8 precision not in this runner")
    fp8 = [c for c in cases if c["precision"] == "fp8"]
    emulated = [c["id"] for c in fp8 if c.get("emulated") is not False]
    if not cuda:  # no native fp8 GEMM on the CPU: emulation is expected there
        return _verdict(None, "fp8 native", f"CPU run, {len(fp8)} fp8 case(s) emulated")
    return _verdict(bool(fp8) and not emulated, "fp8 native",
                    f"{len(fp8)} fp8 case(s); emulated: {emulated or 'none'}")


def profile_verdicts(profile: dict[str, Any] | None) -> list[str]:
    if not profile or not profile.get("pipelines"):
        return [_verdict(False, "profiler", "no profile.json (see the layer step)")]
    pipelines = profile["pipelines"]
    if not profile["cuda"]:
        return [_verdict(None, "profiler", f"{len(pipelines)} pipeline(s) profiled on the "
                         f"CPU (operators only: no CUTLASS, NCCL or copies to check)")]
    def pick(key: str) -> dict[str, int]:
        return {label: p[key] for label, p in pipelines.items()}
    return [
        _verdict(all(pick("cutlassGrouped")[lb] > 0 for lb in pipelines if "bf16" in lb),
                 "CUTLASS grouped GEMMs in the step", str(pick("cutlassGrouped"))),
        _verdict(all(n > 0 for n in pick("nccl").values()), "NCCL kernels in the step",
                 str(pick("nccl"))),
        _verdict(not any(pick("deviceToHost").values()),
                 "no device-to-host copy inside the step", str(pick("deviceToHost"))),
    ]


def main(out_dir: str) -> int:
    out = Path(out_dir)
    ceiling = _load(out / "ceiling.json", last_line=True)
    measured = float(ceiling["bf16TFLOPs"]) if ceiling else None
    if measured:
        print(f"measured bf16 GEMM ceiling {measured:.1f} TFLOP/s (n={ceiling['n']}, "
              f"same run)")
    reports = [r for r in (_load(out / name) for name in REPORTS) if r and "cases" in r]
    for report in reports:
        summarize(report, measured or float("nan"))
    profile = _load(out / "profile.json")
    cuda = bool(profile["cuda"]) if profile else any(
        not r["meta"]["timingNote"].startswith("CPU run") for r in reports)
    verdicts = [*step_verdicts(out / "steps.tsv"), *case_verdicts(reports, cuda),
                *profile_verdicts(profile)]
    print("== verdicts")
    print("\n".join(verdicts))
    return int(any(v.startswith("FAIL") for v in verdicts))


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
