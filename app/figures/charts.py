"""The eleven report charts, each with the meta notes that qualify it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from app.case_view import CaseView
from app.figures.layout import to_figure
from app.figures.panel_charts import memory_spec, routing_spec, scaling_spec
from app.figures.report_charts import (
    arithmetic_intensity_spec,
    hbm_spec,
    layer_time_spec,
    nvlink_spec,
    percent_of_peak_spec,
    phases_spec,
    throughput_spec,
)
from app.figures.roofline import roofline_spec
from app.figures.style import Meta, Spec


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    spec: Callable[[Sequence[CaseView], Meta], Spec]
    notes: tuple[str, ...]  # the meta notes that qualify it (placementNote: see below)
    # Why a view has nothing for it to show ('' when it has): the page then leaves it out.
    absent: Callable[[Sequence[CaseView]], str] = lambda cases: ""
    # Its legend is of something the page's shared legend of styles does not name (the
    # phases): kept on the chart.
    own_legend: bool = False
    # Its points carry numbers (figures.point_key): the chart is shown with the key.
    keyed: bool = False

    def make(self, cases: Sequence[CaseView], meta: Meta, *, legend: bool = True) -> Spec:
        """The chart's spec; ``legend=False`` for a page that shows one shared legend of
        the styles instead (plotly lays out each legend anew, a large part of drawing)."""
        spec = self.spec(cases, meta)
        if not legend and not self.own_legend:
            spec["layout"]["showlegend"] = False
        return spec

    def build(self, cases: Sequence[CaseView], meta: Meta, *, legend: bool = True) -> go.Figure:
        return to_figure(self.make(cases, meta, legend=legend))


def _no_phases(cases: Sequence[CaseView]) -> str:
    if any(c.phaseMS for c in cases):
        return ""
    return "no case in view has per-phase times (phaseMS: the runner did not time phases)"


# placementNote qualifies every cross-EP comparison: the dashboard adds it to any chart
# whose view spans more than one EP.
CHARTS: tuple[Chart, ...] = (
    Chart("throughput", "Useful TFLOP/s per GPU", throughput_spec, ("timingNote",)),
    Chart("percent-of-peak", "% of peak", percent_of_peak_spec, ("peakNote", "timingNote")),
    Chart("layer-time", "Layer time", layer_time_spec, ("timingNote",)),
    Chart("nvlink", "NVLink TX/RX", nvlink_spec, ("bandwidthNote",)),
    Chart("hbm", "Analytical HBM", hbm_spec, ("bandwidthNote", "timingNote")),
    Chart("memory", "Memory", memory_spec, ("memoryNote",)),
    Chart("routing", "Routing", routing_spec, ()),
    Chart("scaling", "Scaling", scaling_spec, ("timingNote",), keyed=True),
    Chart("roofline", "Roofline", roofline_spec, ("peakNote", "bandwidthNote"), keyed=True),
    Chart("intensity", "Arithmetic intensity", arithmetic_intensity_spec, ("timingNote",),
          keyed=True),
    Chart("phases", "Phases", phases_spec, ("phaseNote", "timingNote"), _no_phases,
          own_legend=True),
)

