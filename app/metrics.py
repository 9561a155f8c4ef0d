"""Every metric a screen names, once: its case field, its label and unit, which way is
better and how many digits it is shown with. The matrix, history, compare and the export
pick from this table by key; none keeps a list of its own. Kept free of the server's
packages: the command line (``moescope export --matrix-metric``) reads it too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class Metric:
    key: str  # a case field, or "phaseMS.combine": a field of a nested object
    name: str  # short, for a line that gives the unit apart ("layer", "NVLink TX")
    label: str  # in full, with its unit, for an axis or a menu
    unit: str
    better: Better | None  # None: no value is better (the limiter, a clock)
    digits: int
    family: str  # what compare groups it under
    series: str | None = None  # its name in a history (GET /history), where it has one


TABLE: tuple[Metric, ...] = (
    Metric("layerMS", "layer", "layer time (ms)", "ms", "lower", 3, "time", "layerMS"),
    Metric("forwardMS", "forward", "forward time (ms)", "ms", "lower", 3, "time"),
    Metric("backwardMS", "backward", "backward time (ms)", "ms", "lower", 3, "time"),
    Metric("usefulTFPerGPU", "useful", "useful TFLOP/s per GPU", "TFLOP/s", "higher", 0,
           "throughput", "usefulTFPerGPU"),
    Metric("percentOfPeak", "of peak", "% of peak", "%", "higher", 1, "throughput",
           "percentOfPeak"),
    Metric("nvlinkTXGBps", "NVLink TX", "NVLink TX GB/s", "GB/s", "higher", 0, "bandwidth",
           "nvlinkTXGBps"),
    Metric("nvlinkRXGBps", "NVLink RX", "NVLink RX GB/s", "GB/s", "higher", 0, "bandwidth",
           "nvlinkRXGBps"),
    Metric("nvlinkMaxTXGBps", "NVLink TX, busiest rank", "NVLink GB/s (busiest rank, TX)",
           "GB/s", "higher", 0, "bandwidth"),
    Metric("analyticalHBMGBps", "HBM", "HBM GB/s (analytical)", "GB/s", "higher", 0,
           "bandwidth"),
    Metric("limiter", "limiter", "limiter", "", None, 0, "bounds"),
    Metric("computeUtilPercent", "compute util", "compute util % (busiest rank)", "%",
           "higher", 1, "bounds"),
    Metric("hbmUtilPercent", "HBM util", "HBM util % (busiest rank)", "%", "higher", 1,
           "bounds"),
    Metric("nvlinkUtilPercent", "NVLink util", "NVLink util % (busiest rank)", "%", "higher", 1,
           "bounds"),
    Metric("hotRankFactor", "hot rank", "busiest rank x mean rows", "x", None, 2, "bounds"),
    Metric("communicationSharePercent", "communication", "communication % of phases", "%",
           "lower", 1, "bounds"),
    Metric("allocatedPeakGiB", "allocated", "allocated GiB", "GiB", "lower", 2, "memory"),
    Metric("reservedPeakGiB", "reserved", "reserved GiB", "GiB", "lower", 2, "memory"),
    Metric("phaseMS.dispatch", "dispatch", "dispatch phase (ms)", "ms", "lower", 3, "phases",
           "dispatchMS"),
    Metric("phaseMS.experts", "experts", "experts phase (ms)", "ms", "lower", 3, "phases",
           "expertsMS"),
    Metric("phaseMS.combine", "combine", "combine phase (ms)", "ms", "lower", 3, "phases",
           "combineMS"),
    Metric("gpuState.smClockMinMHz", "SM clock min", "SM clock min (MHz)", "MHz", None, 0,
           "GPU state"),
    Metric("gpuState.smClockMaxMHz", "SM clock max", "SM clock max (MHz)", "MHz", None, 0,
           "GPU state"),
    Metric("gpuState.powerMaxW", "power max", "power max (W)", "W", None, 0, "GPU state"),
)
BY_KEY: dict[str, Metric] = {m.key: m for m in TABLE}
BY_SERIES: dict[str, Metric] = {m.series: m for m in TABLE if m.series}


def pick(*keys: str) -> tuple[Metric, ...]:
    return tuple(BY_KEY[key] for key in keys)


# What each screen offers, in its order.
MATRIX = pick("usefulTFPerGPU", "percentOfPeak", "layerMS", "nvlinkMaxTXGBps",
              "analyticalHBMGBps", "limiter", "computeUtilPercent", "hbmUtilPercent",
              "nvlinkUtilPercent", "hotRankFactor", "communicationSharePercent")
HISTORY = tuple(BY_SERIES.values())
COMPARE = tuple(m for m in TABLE if m.family != "bounds" and m.key != "nvlinkMaxTXGBps")
