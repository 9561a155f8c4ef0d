"""The charts of one case's history: layer time per report with its windows' min-max band
and the flagged reports marked, and useful throughput per report.

Input: the points as the history endpoint gives them (``app.services.history.point_dict``),
oldest first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.figures.layout import chart_layout, figure, titled
from app.figures.style import Spec, Trace
from ingest.regressions import MIN_POINTS

Point = dict[str, Any]

REGRESSION_COLOUR = "#d62728"
IMPROVEMENT_COLOUR = "#2ca02c"
LINE_COLOUR = "#1f77b4"
_FLAGS = {"regression": (REGRESSION_COLOUR, "triangle-up"),
          "improvement": (IMPROVEMENT_COLOUR, "triangle-down")}


def point_label(point: Point) -> str:
    """The x label: the report's date and id (two reports may share a date)."""
    return f"{point['date']} #{int(point['reportId'])}"


def verdict_text(point: Point) -> str:
    status = str(point["status"])
    if status == "insufficient_history":
        return f"fewer than {MIN_POINTS} earlier points ({int(point['baselinePoints'])})"
    return (f"{status}: {point['changePercent']:+.1f} % vs median {point['baseline']:.4g} ms "
            f"of {int(point['baselinePoints'])} earlier, noise {point['noisePercent']:.1f} %")


def _x_axis(points: Sequence[Point]) -> dict[str, Any]:
    return {"title": titled("report (date #id), oldest first"), "type": "category",
            "tickangle": -40, "automargin": True, "showticklabels": len(points) <= 40}


def _quiet_zone(points: Sequence[Point], threshold_percent: float) -> list[Trace]:
    """Where each point could have landed without being flagged: its baseline (the median
    of the points before it) +- the larger of the threshold and the noise it was judged
    with. A point outside the grey band is news; inside, it is noise."""
    x = [point_label(p) for p in points]

    def edge(p: Point, sign: int) -> float | None:
        if p["baseline"] is None:
            return None
        allowed = max(threshold_percent, p["noisePercent"] or 0.0)
        return float(p["baseline"]) * (1 + sign * allowed / 100)

    grey = {"color": "rgba(107, 114, 128, 0.6)", "width": 1, "dash": "dot"}
    return [
        {"type": "scatter", "mode": "lines", "x": x, "y": [edge(p, 1) for p in points],
         "line": grey, "showlegend": False, "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "x": x, "y": [edge(p, -1) for p in points],
         "line": grey, "fill": "tonexty", "fillcolor": "rgba(107, 114, 128, 0.12)",
         "name": "not flagged: median of earlier ± max(threshold, noise)",
         "hoverinfo": "skip"},
    ]


def layer_time_spec(points: Sequence[Point], threshold_percent: float = 5.0) -> Spec:
    x = [point_label(p) for p in points]
    band_hover = "window max %{y:.4f} ms<extra></extra>"
    data: list[Trace] = [*_quiet_zone(points, threshold_percent),
        {"type": "scatter", "mode": "lines", "x": x, "y": [p["windowMaxMS"] for p in points],
         "line": {"width": 0}, "showlegend": False, "hovertemplate": band_hover},
        {"type": "scatter", "mode": "lines", "x": x, "y": [p["windowMinMS"] for p in points],
         "line": {"width": 0}, "fill": "tonexty", "fillcolor": "rgba(31, 119, 180, 0.35)",
         "name": "window min-max", "hovertemplate": "window min %{y:.4f} ms<extra></extra>"},
        {"type": "scatter", "mode": "lines+markers", "x": x,
         "y": [p["layerMS"] for p in points], "name": "layer time",
         "line": {"color": LINE_COLOUR}, "marker": {"color": LINE_COLOUR, "size": 6},
         "customdata": [verdict_text(p) for p in points],
         "hovertemplate": "%{x}<br>layer %{y:.4f} ms<br>%{customdata}<extra></extra>"},
    ]
    for status, (colour, symbol) in _FLAGS.items():
        flagged = [p for p in points if p["status"] == status]
        data.append({
            "type": "scatter", "mode": "markers+text", "name": status,
            "x": [point_label(p) for p in flagged], "y": [p["layerMS"] for p in flagged],
            "text": [f"{p['changePercent']:+.1f} %" for p in flagged],
            "textposition": "top center", "textfont": {"color": colour, "size": 13},
            "marker": {"color": colour, "symbol": symbol, "size": 15,
                       "line": {"width": 1, "color": "white"}},
            "hoverinfo": "skip", "visible": True if flagged else "legendonly",
        })
    # Room above the highest value for the flagged points' labels (plotly's autorange
    # leaves text out and cut them off).
    top = max((v for p in points for v in (p["layerMS"], p["windowMaxMS"]) if v is not None),
              default=None)
    yaxis = {"title": titled("layer time (ms)"), **({"range": [0, top * 1.18]} if top else {})}
    return figure(data, chart_layout(
        "Layer time per report (blue band: the windows' min-max; flagged reports marked)",
        "layer time (ms)", height=460, xaxis=_x_axis(points), yaxis=yaxis,
        legend={"orientation": "h", "y": -0.45, "title": titled("")},
        margin={"l": 70, "r": 20, "t": 50, "b": 150},
    ), empty="no point in this series")


def throughput_spec(points: Sequence[Point]) -> Spec:
    x = [point_label(p) for p in points]
    peak = ["n/a" if p["percentOfPeak"] is None else f"{p['percentOfPeak']:.1f} % of peak"
            for p in points]
    data: list[Trace] = [{
        "type": "scatter", "mode": "lines+markers", "x": x, "name": "useful TFLOP/s per GPU",
        "y": [p["usefulTFPerGPU"] for p in points], "customdata": peak,
        "line": {"color": LINE_COLOUR}, "marker": {"color": LINE_COLOUR, "size": 6},
        "hovertemplate": "%{x}<br>%{y:.1f} TFLOP/s per GPU (%{customdata})<extra></extra>",
    }]
    return figure(data, chart_layout("Useful throughput per report", "TFLOP/s per GPU",
                                     height=340, xaxis=_x_axis(points), showlegend=False),
                  empty="no point in this series")


def history_specs(points: Sequence[Point]) -> dict[str, Spec]:
    return {"layer-time": layer_time_spec(points), "throughput": throughput_spec(points)}
