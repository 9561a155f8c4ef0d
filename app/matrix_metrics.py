"""The metrics a configuration-matrix cell can show, apart from the matrix itself so that
the command line (``moescope export --matrix-metric``, which runs without the server's
packages) offers the same names as the API and the pages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class MatrixMetric:
    wire: str  # the case field the cells show
    label: str
    better: Literal["higher", "lower"] | None  # None: no cell is best (the limiter)
    digits: int = 1


METRICS: dict[str, MatrixMetric] = {m.wire: m for m in (
    MatrixMetric("usefulTFPerGPU", "useful TFLOP/s per GPU", "higher", 0),
    MatrixMetric("percentOfPeak", "% of peak", "higher"),
    MatrixMetric("layerMS", "layer ms", "lower", 3),
    MatrixMetric("nvlinkMaxTXGBps", "NVLink GB/s (busiest rank, TX)", "higher", 0),
    MatrixMetric("analyticalHBMGBps", "HBM GB/s (analytical)", "higher", 0),
    MatrixMetric("limiter", "limiter", None),
)}
DEFAULT_METRIC = "usefulTFPerGPU"


class UnknownMetric(ValueError):
    pass


def metric_for(name: str) -> MatrixMetric:
    try:
        return METRICS[name]
    except KeyError:
        raise UnknownMetric(
            f"metric: {name!r} is not one of {', '.join(METRICS)}") from None
