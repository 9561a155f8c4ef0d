"""The metrics a configuration-matrix cell can show (``app.metrics.MATRIX``), by name, apart
from the matrix itself so that the command line (``moescope export --matrix-metric``, which
runs without the server's packages) offers the same names as the API and the pages."""

from __future__ import annotations

from app.metrics import MATRIX, Metric

MatrixMetric = Metric
METRICS: dict[str, Metric] = {m.key: m for m in MATRIX}
DEFAULT_METRIC = "usefulTFPerGPU"


class UnknownMetric(ValueError):
    pass


def metric_for(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        raise UnknownMetric(
            f"metric: {name!r} is not one of {', '.join(METRICS)}") from None
