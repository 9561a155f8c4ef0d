"""The compare page's chart: head / base layer time per configuration, on a log scale.

Configurations are placed, labelled and grouped as the report page's per-case charts place
them (``configuration.placement`` and ``layout.case_frame``: a tick "EP8 F3072 i1" per
configuration under its mode · category heading, each precision x pipeline one bar beside
the others), so a configuration reads the same on both pages. A bar starts at 1 (no
change) and ends at the ratio, so a slower head rises and a faster one falls. The shaded
band is the noise a change must pass to be news: the median over the cases of
max(threshold, the case's noise); each case's own noise and verdict are in its hover.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.case_view import CaseView
from app.figures.configuration import placement
from app.figures.layout import case_frame, chart_layout, figure, titled
from app.figures.style import Spec, Trace, bar_marker, grouped, series_name, text


@dataclass(frozen=True)
class RatioPoint:
    """One matched case of a comparison as its ratio chart draws it (comparison.ratio_points):
    placed and styled by its head case, labelled by the matched id."""

    case: CaseView
    id: str
    ratio: float
    status: str
    noise_percent: float | None
    verdict: str


def noise_band(points: Sequence[RatioPoint], threshold_percent: float) -> float | None:
    noises = [max(threshold_percent, p.noise_percent) for p in points
              if p.noise_percent is not None]
    return statistics.median(noises) if noises else None


def ratio_spec(points: Sequence[RatioPoint], threshold_percent: float,
               base_id: int, head_id: int) -> Spec:
    heads = [p.case for p in points]
    place = placement(heads)
    by_case = {id(p.case): p for p in points}
    data: list[Trace] = []
    for key, cases in grouped(heads).items():
        group = [by_case[id(c)] for c in cases]
        flagged = [p.status in ("regression", "improvement") for p in group]
        data.append({
            "type": "bar", "name": series_name(key), "legendgroup": series_name(key),
            "x": [place.x[p.case.id] for p in group], "width": place.width * 0.92,
            "base": 1, "y": [p.ratio - 1 for p in group],
            "marker": {**bar_marker(key),
                       "line": {"width": [2.5 if f else 0 for f in flagged],
                                "color": "#111111"}},
            "customdata": [[text(p.id), p.ratio, text(p.verdict)] for p in group],
            "hovertemplate": ("<b>%{customdata[0]}</b><br>head / base %{customdata[1]:.3f}"
                              "<br>%{customdata[2]}<extra>%{fullData.name}</extra>"),
        })
    band = noise_band(points, threshold_percent)
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    if band is not None:
        low, high = 1 / (1 + band / 100), 1 + band / 100
        shapes.append({"type": "rect", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y",
                       "y0": low, "y1": high, "fillcolor": "#9ca3af", "opacity": 0.25,
                       "line": {"width": 0}, "layer": "below"})
        # An annotation on a log axis is placed by the log of its value (a shape is not).
        notes.append({"xref": "x domain", "x": 1, "yref": "y", "y": math.log10(high),
                      "showarrow": False,
                      "xanchor": "right", "yanchor": "bottom", "font": {"color": "#444444"},
                      "text": f"noise band ±{band:.1f} % (median over cases)"})
    shapes.append({"type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y",
                   "y0": 1, "y1": 1, "line": {"color": "#444444", "width": 1}})
    ratios = [p.ratio for p in points] or [1.0]
    span = max(max(ratios), 1 / min(ratios), 1 + (band or 0) / 100) * 1.05
    layout = chart_layout(
        f"Layer time, report {head_id} / report {base_id} (above 1: slower; outlined: "
        "flagged)", "head / base layer time (log)", height=460,
        barmode="overlay", **case_frame(heads, shapes=shapes, annotations=notes),
        yaxis={"title": titled("head / base layer time (log)"), "type": "log",
               "range": [-math.log10(span), math.log10(span)], "rangemode": "normal"})
    return figure(data, layout, empty="no case is in both reports")
