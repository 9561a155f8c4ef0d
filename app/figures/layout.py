"""The frame of every chart: the spec with its template, titles, the case axis, reference
lines, panel titles and the grey 'why empty' notes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from app.case_view import CaseView
from app.figures.configuration import placement
from app.figures.style import PALETTE, Spec, Trace, text

# A small explicit template: plotly's named templates are deep-copied into every figure,
# which costs more than building the figure itself.
# No automargin: plotly measures every tick label and redraws until the margins settle,
# the largest part of drawing a page of charts; the fixed margins fit numeric ticks and
# the configuration labels (see case_frame).
# ticklabeloverflow "allow": otherwise plotly measures each tick label after drawing it
# to hide those past the figure's edge, a forced page layout per label.
_AXIS = {"gridcolor": "#e5e5e5", "zerolinecolor": "#cccccc", "linecolor": "#999999",
         "ticklabeloverflow": "allow"}
_TEMPLATE: dict[str, Any] = {"layout": {
    "plot_bgcolor": "white", "paper_bgcolor": "white", "font": {"size": 12},
    # Magnitudes from zero: an axis fitted to two close values makes 1 % look like 2x.
    "xaxis": _AXIS, "yaxis": {**_AXIS, "rangemode": "tozero"}, "colorway": list(PALETTE),
    # Titles from the left edge: centred, a long one ran under plotly's mode bar.
    "title": {"x": 0, "xref": "paper", "xanchor": "left"},
}}


def figure(data: Sequence[Trace], layout: dict[str, Any], *,
           empty: str | None = None) -> Spec:
    """The spec; ``empty`` is what the chart says in its middle when it has no point to
    draw (no case in view, or none with the charted value): blank axes alone read as a
    drawing failure, or as values of zero."""
    if empty is not None and not _has_points(data):
        note = muted({"text": empty, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
                      "showarrow": False}, size=14)
        layout = {**layout, "annotations": [*layout.get("annotations", []), note]}
    return {"data": list(data), "layout": {"template": _TEMPLATE, **layout}}


def muted(annotation: dict[str, Any], size: int = 12) -> dict[str, Any]:
    """An annotation in the grey of the page's muted text: why a chart or panel is empty."""
    return {**annotation, "font": {"size": size, "color": "#6b7280"}}


def _has_points(data: Sequence[Trace]) -> bool:
    for trace in data:
        if trace.get("type") == "heatmap":
            if any(v is not None for row in trace["z"] for v in row):
                return True
        elif any(x is not None and y is not None
                 for x, y in zip(trace.get("x", []), trace.get("y", []), strict=False)):
            return True
    return False


def missing(cases: Sequence[CaseView], what: str) -> str:
    """The empty chart's message: no case at all, or none with ``what``."""
    return f"no case in view has {what}" if cases else "no case in view"


def to_figure(spec: Spec) -> go.Figure:
    return go.Figure(data=spec["data"], layout=spec["layout"], _validate=False)


def titled(value: str) -> dict[str, str]:
    return {"text": value}


def chart_layout(title: str, y_title: str, *, height: int = 420, **extra: Any) -> dict[str, Any]:
    return {
        "title": titled(title), "height": height,
        "margin": {"l": 70, "r": 20, "t": 50, "b": 60},
        "legend": {"title": titled("precision · pipeline")},
        "hoverlabel": {"align": "left"}, "yaxis": {"title": titled(y_title)}, **extra,
    }


# Past this many configurations their tick labels would overlap: hover names the case.
MAX_LABELLED_CONFIGURATIONS = 40
_GROUP_LINE = {"color": "#9ca3af", "width": 1, "dash": "dot"}


def case_frame(cases: Sequence[CaseView], *, shapes: Sequence[Any] = (),
               annotations: Sequence[Any] = (), axis: str = "x") -> dict[str, Any]:
    """The layout of a per-case chart's x axis (``axis``): one tick per configuration
    (``EP8 F3072 i1``), its precision x pipeline variants side by side around it, the
    configurations grouped under a mode · category heading with a dotted line between
    groups. Returns the xaxis, shapes, annotations and margin to merge into the layout."""
    place = placement(cases)
    labelled = len(place.labels) <= MAX_LABELLED_CONFIGURATIONS
    xaxis: dict[str, Any] = {
        "title": titled("configuration: EP, expert width F, imbalance i "
                        "(precision x pipeline side by side)" if labelled else
                        "configuration (too many to label: hover names each case)"),
        "zeroline": False, "showgrid": False, "tickmode": "array",
        "tickvals": list(range(len(place.labels))), "ticktext": place.labels,
        "showticklabels": labelled, "tickangle": 0, "tickfont": {"size": 10},
        "range": [-0.5, max(len(place.labels), 1) - 0.5],
    }
    heads = [] if len(place.groups) < 2 and not labelled else [
        {"text": text(g.title), "xref": axis, "x": (g.first + g.last) / 2, "yref": "paper",
         "y": 1.0, "yanchor": "bottom", "showarrow": False, "font": {"size": 11}}
        for g in place.groups]
    lines = [{"type": "line", "xref": axis, "x0": g.first - 0.5, "x1": g.first - 0.5,
              "yref": "paper", "y0": 0, "y1": 1, "line": _GROUP_LINE}
             for g in place.groups[1:]]
    return {"xaxis": xaxis, "shapes": [*shapes, *lines],
            "annotations": [*annotations, *heads],
            "margin": {"l": 70, "r": 20, "t": 64, "b": 96 if labelled else 60}}


def hline(y: float | None, label: str, yref: str = "y") -> tuple[list[Any], list[Any]]:
    """A dashed reference line across the plot, as (shapes, annotations)."""
    if y is None:
        return [], []
    xref = "x domain" if yref == "y" else f"x{yref[1:]} domain"
    shape = {"type": "line", "xref": xref, "x0": 0, "x1": 1, "yref": yref, "y0": y, "y1": y,
             "line": {"dash": "dash", "color": "#444444", "width": 1.5}}
    note = {"xref": xref, "x": 0, "yref": yref, "y": y, "text": label, "showarrow": False,
            "xanchor": "left", "yanchor": "bottom", "font": {"color": "#444444"}}
    return [shape], [note]


def panel_title(text_: str, x: float, y: float) -> dict[str, Any]:
    return {"text": text_, "xref": "paper", "yref": "paper", "x": x, "y": y,
            "xanchor": "center", "yanchor": "bottom", "showarrow": False,
            "font": {"size": 13}}
