"""Synthetic series as moescope's own runner reports them (host facts, phases, GPU state on
every case), and a slowdown of one case that leaves its phases as they were."""

from __future__ import annotations

import copy
from typing import Any

from history_helpers import synthetic_series

Body = dict[str, Any]
GPU_STATE = {"smClockMinMHz": 1965.0, "smClockMaxMHz": 1965.0, "powerMaxW": 1100.0,
             "temperatureMaxC": 61.0, "throttleReasons": 0, "throttleReasonNames": [],
             "samples": 40}
HOST = {"hostname": "gb300-a", "driver": "580.95", "cuda": "13.0", "torch": "2.13.0",
        "nccl": "2.27.7", "worldSize": 8}
# The dispatch, experts and combine shares of the forward time a phase pass might find.
SHARES = {"dispatch": 0.2, "experts": 0.5, "combine": 0.3}


def nvfp4_mega(report: Body) -> list[str]:
    return [c["id"] for c in report["cases"]
            if (c["mode"], c["precision"], c["pipeline"]) == ("inference", "nvfp4", "mega")]


def with_runner_fields(report: Body) -> None:
    """What moescope's own runner adds: host facts, phases and GPU state on every case."""
    report["meta"]["host"] = copy.deepcopy(HOST)
    for case in report["cases"]:
        case["phaseMS"] = {p: case["forwardMS"] * share for p, share in SHARES.items()}
        case["gpuState"] = copy.deepcopy(GPU_STATE)


def slow_down(case: Body, extra_ms: float) -> None:
    """The case ``extra_ms`` slower in its layer (and forward) time, windows and throughput
    moved alike, its phases left as they were."""
    factor = (case["layerMS"] + extra_ms) / case["layerMS"]
    case["layerMS"] += extra_ms
    case["forwardMS"] += extra_ms
    case["windows"] = {k: [w * factor for w in ws] for k, ws in case["windows"].items()}
    case["usefulTFPerGPU"] /= factor


def series(reference: Body, reports: int = 6) -> list[Body]:
    bodies = synthetic_series(reference, reports, seed=7)
    for body in bodies:
        with_runner_fields(body)
    return bodies


def combine_slowed(reference: Body, reports: int = 6) -> tuple[list[Body], list[str]]:
    """A series whose newest report has its nine inference nvfp4 mega cases 18 % slower in
    layer time, all of it in the combine phase. The bodies and the nine ids."""
    bodies = series(reference, reports)
    slowed = nvfp4_mega(bodies[-1])
    for case in bodies[-1]["cases"]:
        if case["id"] in slowed:
            extra = 0.18 * case["layerMS"]
            slow_down(case, extra)
            case["phaseMS"]["combine"] += extra  # only the combine moved
    return bodies, slowed
