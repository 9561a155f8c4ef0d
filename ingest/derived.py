"""Derived metrics and caveat codes of docs/metrics.md, pure functions over one report's data.

Every figure is computed from the report's own meta (its peaks), never from constants.
Over 350 lines: the metrics refer to one another (the busiest rank's utilisations feed the
limiter, the limiter the caveats), and docs/metrics.md is checked against this one module.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ingest.precisions import ELEMENT_BYTES
from ingest.schema import Case, Meta

NOISY_WINDOW_SPREAD_PERCENT = 5.0
# Below this utilisation of every roof, no roof explains the time: launches, synchronisation
# and imbalance do (the `latency` limiter).
LATENCY_UTIL_PERCENT = 25.0
# Below this utilisation of the highest roof, the case reaches no roof: its limiter is the
# "nearest roof", not what bounds it.
BOUND_UTIL_PERCENT = 60.0
TRAINING_FACTOR = 3  # forward + backward (two GEMMs per forward GEMM), as the model counts
# The busiest rank receiving this many times the mean rows is a hot rank.
HOT_RANK_FACTOR = 2.0
# NVML's clocks-event (throttle) reason bits (nvml.h, nvmlClocksEventReason*).
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal",
    0x80: "hw_power_brake", 0x100: "display_clock_setting",
}
# Those that mean heat or the hardware held the clocks down: the caveat 'throttled'.
# sw_power_cap (0x4) is not among them: most compute-bound work meets its power limit,
# and that is the GPU's normal ceiling, not a fault; gpuState.powerCapped says so apart.
THROTTLING = (0x8, 0x20, 0x40, 0x80)
POWER_CAP = 0x4
APPLICATIONS_CLOCKS = 0x2  # clocks held at the applications (or locked) clocks setting


def clock_event_names(bits: int) -> list[str]:
    """The names of NVML clocks-event reason bits; unknown bits as one hex entry."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if bits & bit]
    unknown = bits & ~sum(CLOCK_EVENT_REASONS)
    return [*names, *([f"unknown_{unknown:#x}"] if unknown else [])]

# Which meta note qualifies which figures, for the API and the dashboard alike.
NOTE_QUALIFIES: dict[str, str] = {
    "peakNote": "% of peak",
    "measuredCeilingNote": "% of measured ceiling",
    "timingNote": "times and throughput",
    "bandwidthNote": "NVLink and HBM",
    "placementNote": "every cross-EP comparison",
    "memoryNote": "memory",
    "phaseNote": "per-phase times and bandwidths",
    "gpuStateNote": "GPU state and the throttled caveat",
    "expertNote": "expert GEMM kernels and the expert_loop caveat",
}


@dataclass(frozen=True)
class ReportNote:
    key: str
    qualifies: str | None
    text: str


def report_notes(meta: Mapping[str, Any]) -> list[ReportNote]:
    """Report-level caveats: every ``*Note`` of the meta, verbatim, known or not."""
    return [
        ReportNote(key, NOTE_QUALIFIES.get(key), value)
        for key, value in meta.items()
        if key.endswith("Note") and isinstance(value, str)
    ]


@dataclass(frozen=True)
class Derived:
    percentOfPeak: float | None
    percentOfMeasuredCeiling: float | None
    hbmPercentOfPeak: float | None
    nvlinkTXPercentOfPeak: float | None
    nvlinkRXPercentOfPeak: float | None
    windowSpreadPercent: float | None
    observedImbalance: float | None
    hotRankFactor: float | None
    computeUtilPercent: float | None
    hbmUtilPercent: float | None
    nvlinkUtilPercent: float | None
    limiter: str | None
    imbalanceLossPercent: float | None
    communicationSharePercent: float | None

    def as_dict(self) -> dict[str, float | str | None]:
        # Every field is a scalar: asdict's recursive deep copy was a tenth of an ingest.
        return dict(vars(self))


@dataclass(frozen=True)
class Caveat:
    code: str
    message: str


def _finite(value: float) -> float | None:
    """Finite inputs can still overflow a ratio (1e10 over a 1e-300 peak): the API cannot
    send an infinity as JSON, and sorting would put it first, so it is no value at all."""
    return value if math.isfinite(value) else None


def _percent(value: float | None, peak: float | None) -> float | None:
    if value is None or not peak:
        return None
    return _finite(value / peak * 100.0)


def peak_for(meta: Meta, precision: str) -> float | None:
    return meta.theoreticalTFPerGPU.get(precision)


def rows_per_expert(case: Case, experts_total: int) -> int | None:
    """The busiest rank's received rows per local expert (rounded up): the shape at which
    the runner measured the case's grouped-GEMM ceiling."""
    if not case.receiveRows or experts_total % case.ep:
        return None
    local = experts_total // case.ep
    return -(-max(case.receiveRows) // local)


def measured_ceiling_for(meta: Meta, case: Case) -> float | None:
    """The grouped-GEMM ceiling the run measured at this case's precision, shape and
    pipeline (padding and stages), in TFLOP/s; None when the report has none there."""
    ceilings = meta.measuredCeilings
    rows = rows_per_expert(case, meta.shape.E)
    if ceilings is None or rows is None:
        return None
    for c in ceilings.grouped:
        if (c.precision, c.experts, c.rowsPerExpert, c.D, c.F) == (
                case.precision, meta.shape.E // case.ep, rows, meta.shape.D, case.F) \
                and c.pipeline in (None, case.pipeline) and c.mode in (None, case.mode):
            return c.tf
    return None


def window_spread_percent(windows: list[float]) -> float | None:
    if not windows:
        return None
    return _finite((max(windows) - min(windows)) / statistics.median(windows) * 100.0)


def observed_imbalance(receive_rows: list[int]) -> float | None:
    if not receive_rows:
        return None
    mean = sum(receive_rows) / len(receive_rows)
    return max(receive_rows) / mean if mean else None


def busiest_link_gbps(case: Case) -> float | None:
    """The busiest rank's link in its busier direction; None when NVLink was not measured."""
    measured = [v for v in (case.nvlinkMaxTXGBps, case.nvlinkMaxRXGBps) if v is not None]
    return max(measured) if measured else None


def nearest_roof(compute: float | None, hbm: float | None,
                 nvlink: float | None) -> tuple[str, float] | None:
    """The roof with the highest utilisation and that utilisation (the first of compute,
    hbm, nvlink on a tie); None when no roof is known."""
    known = [(roof, u) for roof, u in (("compute", compute), ("hbm", hbm), ("nvlink", nvlink))
             if u is not None]
    return max(known, key=lambda pair: pair[1]) if known else None


def limiter(compute: float | None, hbm: float | None, nvlink: float | None) -> str | None:
    """The nearest roof, or ``latency`` when none reaches LATENCY_UTIL_PERCENT; None when no
    roof is known."""
    nearest = nearest_roof(compute, hbm, nvlink)
    if nearest is None:
        return None
    roof, best = nearest
    return roof if best >= LATENCY_UTIL_PERCENT else "latency"


def communication_share_percent(case: Case) -> float | None:
    """(dispatch + combine) / the sum of the forward phases, quantize included, x 100;
    None without phaseMS."""
    phases = case.phaseMS
    if phases is None:
        return None
    total = (phases.dispatch + phases.experts + phases.combine + (phases.route or 0.0)
             + (phases.quantize or 0.0))
    return _finite((phases.dispatch + phases.combine) / total * 100.0)


def busiest_rank_hbm_bytes(meta: Meta, case: Case) -> float | None:
    """The analytical model's bytes for the rank with the most received rows R: its own R
    in the routed-activation term, all its El experts' weights when R > 0; None when the
    precision's element size or the routing is unknown, or E is not a multiple of ep."""
    element = ELEMENT_BYTES.get(case.precision)
    shape = meta.shape
    if element is None or not case.receiveRows or shape.E % case.ep:
        return None
    rows = max(case.receiveRows)
    d, f = shape.D, case.F
    weights = (shape.E // case.ep) * 3 * d * f * element if rows > 0 else 0
    forward = (shape.T * d * 2 + rows * (2 * d + 4 * f) + weights
               + shape.T * shape.K * 4)
    return float(forward) * (TRAINING_FACTOR if case.mode == "training" else 1)


def hbm_util_percent(meta: Meta, case: Case) -> float | None:
    bytes_ = busiest_rank_hbm_bytes(meta, case)
    if bytes_ is None:
        return None
    return _percent(bytes_ / (case.layerMS * 1e-3) / 1e9, meta.theoreticalHBMGBps)


def _times(value: float | None, factor: float | None) -> float | None:
    return None if value is None or factor is None else _finite(value * factor)


def imbalance_loss_percent(hot: float | None) -> float | None:
    """The share of the other ranks' time spent waiting for the busiest."""
    return None if not hot else (1.0 - 1.0 / hot) * 100.0


def derive(meta: Meta, case: Case) -> Derived:
    """The figures of DESIGN.md "Derived metrics". The layer waits for its busiest rank, so
    the utilisations and the limiter are that rank's: its useful FLOP rate is the mean
    rank's times hotRankFactor (FLOPs scale with received rows)."""
    emulated = case.emulated
    percent = None if emulated else _percent(case.usefulTFPerGPU,
                                             peak_for(meta, case.precision))
    hot = observed_imbalance(case.receiveRows)
    compute = _times(percent, hot)
    hbm = hbm_util_percent(meta, case)
    nvlink = _percent(busiest_link_gbps(case), meta.theoreticalNVLinkGBpsPerDirection)
    ceiling = None if emulated else measured_ceiling_for(meta, case)
    return Derived(
        percentOfPeak=percent,
        percentOfMeasuredCeiling=_times(_percent(case.usefulTFPerGPU, ceiling), hot),
        hbmPercentOfPeak=_percent(case.analyticalHBMGBps, meta.theoreticalHBMGBps),
        nvlinkTXPercentOfPeak=_percent(case.nvlinkTXGBps, meta.theoreticalNVLinkGBpsPerDirection),
        nvlinkRXPercentOfPeak=_percent(case.nvlinkRXGBps, meta.theoreticalNVLinkGBpsPerDirection),
        windowSpreadPercent=window_spread_percent(case.windows.combined),
        observedImbalance=hot,
        hotRankFactor=hot,
        computeUtilPercent=compute,
        hbmUtilPercent=hbm,
        nvlinkUtilPercent=nvlink,
        limiter=limiter(compute, hbm, nvlink),
        imbalanceLossPercent=imbalance_loss_percent(hot),
        communicationSharePercent=communication_share_percent(case),
    )


def caveats(meta: Meta, case: Case, derived: Derived | None = None) -> list[Caveat]:
    d = derived or derive(meta, case)
    peak = peak_for(meta, case.precision)
    out: list[Caveat] = []

    def add(code: str, message: str) -> None:
        out.append(Caveat(code, message))

    if case.numericalAccepted is False:
        add("numerical_not_accepted", "output failed the numerical check against the reference")
    if case.graphAccepted is False:
        add("graph_not_accepted", "the CUDA-graph replay did not reproduce the eager result")
    if case.ooms > 0:
        add("oom", f"{case.ooms} out-of-memory event(s) during the case")
    if case.allocationRetries > 0:
        add("allocation_retries", f"{case.allocationRetries} allocator retries during the case")
    if any(case.recompute):
        layers = sum(case.recompute)
        add("recompute", f"{layers} layer(s) recomputed activations to fit capacity")
    if d.windowSpreadPercent is not None and d.windowSpreadPercent > NOISY_WINDOW_SPREAD_PERCENT:
        add("noisy_windows",
            f"timing windows spread {d.windowSpreadPercent:.1f} % of their median "
            f"(> {NOISY_WINDOW_SPREAD_PERCENT:g} %)")
    if d.observedImbalance is not None and d.observedImbalance >= HOT_RANK_FACTOR:
        add("hot_rank",
            f"the busiest rank receives {d.observedImbalance:.1f} x the mean rows: averaged "
            f"bandwidth understates the busiest rank's link by {d.observedImbalance:.1f} x")
    if case.ep > 1 and case.nvlinkMaxTXGBps == 0 and case.nvlinkMaxRXGBps == 0:
        # Rank 0 alone sending nothing (every row routed to it) is not this: the others send.
        add("no_ep_traffic", "no rank sent a row to another: the case measured no EP traffic")
    if peak is None:
        add("no_peak", f"the report gives no theoretical peak for precision {case.precision!r}")
    if case.nvlinkTXGBps is None or case.nvlinkRXGBps is None:
        add("nvlink_not_measured", "NVLink traffic was not measured for this case")
    if not case.emulated and peak is not None and case.usefulTFPerGPU > peak:
        add("above_peak",
            f"useful throughput {case.usefulTFPerGPU:.1f} TFLOP/s exceeds the "
            f"{case.precision} peak {peak:g} TFLOP/s: a data error")
    if case.emulated:
        add("emulated",
            f"{case.precision} was emulated in bf16: numerics are faithful, speed is not")
    if d.percentOfMeasuredCeiling is not None and d.percentOfMeasuredCeiling > 100.0:
        add("above_ceiling",
            f"the busiest rank's useful rate is {d.percentOfMeasuredCeiling:.0f} % of the "
            f"grouped-GEMM ceiling the run measured at its shape: the ceiling or the timing "
            f"is wrong")
    throttled = _throttled(case)
    if throttled:
        add("throttled", f"clocks were held down during the timed windows ({throttled})")
    if _loops_over_experts(case):
        add("expert_loop",
            f"the experts ran as a Python loop, one GEMM launch per expert "
            f"({case.expertKernel}): times include per-expert launch overhead a grouped "
            f"GEMM avoids")
    if case.failure:
        add("failed", f"the case ended early: {case.failure}; the later phases' fields are null")
    return out


def _throttled(case: Case) -> str:
    """The thermal, slowdown and power-brake reasons the case's GPU state saw, named;
    '' if none."""
    if case.gpuState is None:
        return ""
    bits = case.gpuState.throttleReasons
    return ", ".join(CLOCK_EVENT_REASONS[bit] for bit in THROTTLING if bits & bit)


# expertKernel values that are a Python loop over the experts (runner.layer).
LOOP_KERNELS = frozenset({"loop", "scaled_mm_loop"})


def _loops_over_experts(case: Case) -> bool:
    return bool(case.expertKernel) and bool(
        LOOP_KERNELS & set(str(case.expertKernel).split("+")))


# What each code means, for a badge's hover (a case's own caveat names its figures).
CAVEAT_MEANINGS: dict[str, str] = {
    "numerical_not_accepted": "the output failed the numerical check against the reference",
    "graph_not_accepted": "the CUDA-graph replay did not reproduce the eager result",
    "oom": "out-of-memory events during the case: some fields are null",
    "allocation_retries": "the allocator retried allocations during the case",
    "recompute": "layers recomputed activations to fit capacity",
    "noisy_windows": f"timing windows spread over {NOISY_WINDOW_SPREAD_PERCENT:g} % of their "
                     "median",
    "hot_rank": f"the busiest rank receives at least {HOT_RANK_FACTOR:g} x the mean rows: "
                "averaged bandwidth understates its link by that factor",
    "no_ep_traffic": "no rank sent a row to another: no EP traffic was measured",
    "no_peak": "the report gives no theoretical peak for the case's precision",
    "nvlink_not_measured": "NVLink traffic was not measured",
    "above_peak": "useful throughput over the theoretical peak: a data error",
    "emulated": "the precision was emulated in bf16: numerics are faithful, speed is not",
    "above_ceiling": "the busiest rank's useful rate is over 100 % of the GEMM ceiling the run "
                     "measured at its shape",
    "throttled": "thermal, hardware slowdown or power brake held the clocks down during the "
                 "timed windows",
    "expert_loop": "the experts ran as a Python loop (no grouped GEMM): slower than a "
                   "grouped kernel",
    "failed": "the case ended early: the later phases' fields are null",
}

CAVEAT_CODES = (
    "numerical_not_accepted", "graph_not_accepted", "oom", "allocation_retries", "recompute",
    "noisy_windows", "hot_rank", "no_ep_traffic", "no_peak", "nvlink_not_measured", "above_peak",
    "emulated", "above_ceiling", "throttled", "failed", "expert_loop",
)
