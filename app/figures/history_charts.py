"""The charts of a case's history, on a time axis (each report at its date; its id in the
hover): the chosen metric per report, the older reports summarised per bucket (mean line,
min-max band), the flagged reports marked, a vertical line where the provenance changed
(named: "driver 580.95 -> 580.159") and at each step an admin marked, outliers crossed;
other cases (e.g. the configuration's other precisions) overlaid.

Input: points, buckets, marks and provenance changes as the history endpoint gives them
(``app.services.history``), oldest first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.figures.layout import chart_layout, figure, titled
from app.figures.style import PALETTE, Spec, Trace, text
from app.metrics import BY_SERIES
from ingest.regressions import MIN_BASELINE_POINTS

Point = dict[str, Any]

REGRESSION_COLOUR = "#d62728"
IMPROVEMENT_COLOUR = "#2ca02c"
LINE_COLOUR = "#1f77b4"
PROVENANCE_COLOUR = "#7e22ce"
STEP_COLOUR = "#c2410c"
_FLAGS = {"regression": (REGRESSION_COLOUR, "triangle-up"),
          "improvement": (IMPROVEMENT_COLOUR, "triangle-down")}

# A history metric's name (app.metrics, Metric.series) -> its chart's key on the page.
CHART_KEYS = {"layerMS": "layer-time", "usefulTFPerGPU": "throughput",
              "percentOfPeak": "percent-of-peak", "nvlinkTXGBps": "nvlink-tx",
              "nvlinkRXGBps": "nvlink-rx", "dispatchMS": "dispatch", "expertsMS": "experts",
              "combineMS": "combine"}


def point_label(point: Point) -> str:
    """A report in words: its date and id (two reports may share a date)."""
    return f"{point['date']} #{int(point['reportId'])}"


def verdict_text(point: Point) -> str:
    status = str(point["status"])
    if status == "insufficient_history":
        return f"fewer than {MIN_BASELINE_POINTS} earlier points ({int(point['baselinePoints'])})"
    return (f"{status}: {point['changePercent']:+.1f} % vs median {point['baseline']:.4g} ms "
            f"of {int(point['baselinePoints'])} earlier, noise {point['noisePercent']:.1f} %")


def _hover(point: Point) -> str:
    why = f"<br>why: {text(point['why'])}" if point.get("why") else ""
    marks = "".join(f"<br>marked: {m}" for m in point.get("marks", []))
    return (f"report #{int(point['reportId'])} · {point['date']}<br>{verdict_text(point)}"
            f"{why}{marks}")


def _x_axis() -> dict[str, Any]:
    return {"title": titled("report date"), "type": "date"}


def _quiet_zone(points: Sequence[Point], threshold_percent: float) -> list[Trace]:
    """Where each point could have landed without being flagged: its baseline (the median
    of the points before it) +- the larger of the threshold and the noise it was judged
    with. A point outside the grey band is news; inside, it is noise."""
    x = [p["date"] for p in points]

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


def _bucket_traces(buckets: Sequence[Mapping[str, Any]], metric: str, colour: str,
                   name: str) -> list[Trace]:
    """Each bucket as a flat segment over its dates: the mean, and the min-max band."""
    x: list[Any] = []
    low: list[Any] = []
    high: list[Any] = []
    mid: list[Any] = []
    hover: list[str] = []
    for b in buckets:
        summary = b.get(metric)
        if summary is None:
            continue
        text = (f"{b['reports']} reports, {b['dateFrom']} – {b['dateTo']}<br>"
                f"mean %{{y:.4g}}, "
                f"min {summary['min']:.4g}, max {summary['max']:.4g}")
        x += [b["dateFrom"], b["dateTo"], None]
        low += [summary["min"], summary["min"], None]
        high += [summary["max"], summary["max"], None]
        mid += [summary["mean"], summary["mean"], None]
        hover += [text, text, ""]
    if not x:
        return []
    return [
        {"type": "scatter", "mode": "lines", "x": x, "y": high, "line": {"width": 0},
         "showlegend": False, "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "x": x, "y": low, "line": {"width": 0},
         "fill": "tonexty", "fillcolor": "rgba(107, 114, 128, 0.18)", "hoverinfo": "skip",
         "name": f"{name}: older reports, min-max per bucket"},
        {"type": "scatter", "mode": "lines", "x": x, "y": mid, "name": f"{name}: bucket mean",
         "line": {"color": colour, "dash": "dot", "width": 2}, "customdata": hover,
         "hovertemplate": "%{customdata}<extra></extra>"},
    ]


def _vertical(date: str, label: str, colour: str, dash: str, name: str,
              top: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """A vertical line at a report's date and its label, written along the line: a mark's
    before it from the top, a provenance change's after it from the bottom, so both stay
    legible on one report."""
    line = {"type": "line", "name": name, "xref": "x", "yref": "paper", "x0": date, "x1": date,
            "y0": 0, "y1": 1, "line": {"color": colour, "width": 1.5, "dash": dash},
            "layer": "below"}  # the marked report's own point is drawn over its line
    note = {"x": date, "xref": "x", "yref": "paper", "y": 0.98 if top else 0.02,
            "yanchor": "top" if top else "bottom", "text": label, "showarrow": False,
            "textangle": -90, "xanchor": "right" if top else "left",
            # Clear of the line, so the marked report's point beside it stays visible.
            "xshift": -5 if top else 5, "font": {"size": 11, "color": colour},
            "bgcolor": "rgba(255,255,255,0.85)"}
    return line, note


def _verticals(changes: Sequence[Mapping[str, Any]],
               marks: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[Any]]:
    shapes, notes = [], []
    for change in changes:
        line, note = _vertical(change["date"], "; ".join(change["changes"]),
                               PROVENANCE_COLOUR, "dash", "provenance", top=False)
        shapes.append(line)
        notes.append(note)
    for mark in marks:
        if mark["kind"] == "step":
            line, note = _vertical(mark["date"], f"step: {mark['reason']}", STEP_COLOUR,
                                   "solid", "step", top=True)
            shapes.append(line)
            notes.append(note)
    return shapes, notes


def metric_spec(
    points: Sequence[Point], buckets: Sequence[Mapping[str, Any]],
    changes: Sequence[Mapping[str, Any]], marks: Sequence[Mapping[str, Any]],
    metric: str = "layerMS", overlay: Mapping[str, Sequence[Point]] | None = None,
    *, threshold_percent: float, name: str = "this case",
) -> Spec:
    """One metric per report. Layer time alone (no overlay) also draws the windows' band,
    the band a point could land in unflagged and the flagged reports."""
    y_title = BY_SERIES[metric].label
    layer_alone = metric == "layerMS" and not overlay
    data: list[Trace] = [*_bucket_traces(buckets, metric, LINE_COLOUR, name)]
    if layer_alone:
        data += [*_quiet_zone(points, threshold_percent), *_window_band(points)]
    data.append({"type": "scatter", "mode": "lines+markers", "x": [p["date"] for p in points],
                 "y": [p.get(metric) for p in points], "name": name,
                 "line": {"color": LINE_COLOUR}, "marker": {"color": LINE_COLOUR, "size": 6},
                 "customdata": [_hover(p) for p in points],
                 "hovertemplate": "%{customdata}<br>" + y_title + " %{y:.4g}<extra></extra>"})
    data += _overlay_traces(overlay or {}, metric, y_title)
    data += _outlier_traces(points, metric)
    if layer_alone:
        data += _flag_traces(points)
    shapes, notes = _verticals(changes, marks)
    top = _top(points, buckets, overlay or {}, metric)
    yaxis = {"title": titled(y_title), **({"range": [0, top * 1.18]} if top else {})}
    title = f"{y_title[:1].upper()}{y_title[1:]} per report"
    if changes or any(m["kind"] == "step" for m in marks):
        title += " (dashed: provenance changed; solid: a marked step)"
    return figure(data, chart_layout(
        title, y_title, height=480, xaxis=_x_axis(), yaxis=yaxis, shapes=shapes,
        annotations=notes, legend={"orientation": "h", "y": -0.25, "title": titled("")},
        margin={"l": 70, "r": 20, "t": 50, "b": 120},
    ), empty="no point in this range")


def _window_band(points: Sequence[Point]) -> list[Trace]:
    x = [p["date"] for p in points]
    return [{"type": "scatter", "mode": "lines", "x": x,
             "y": [p["windowMaxMS"] for p in points], "line": {"width": 0},
             "showlegend": False, "hoverinfo": "skip"},
            {"type": "scatter", "mode": "lines", "x": x,
             "y": [p["windowMinMS"] for p in points], "line": {"width": 0},
             "fill": "tonexty", "fillcolor": "rgba(31, 119, 180, 0.30)",
             "name": "window min-max", "hoverinfo": "skip"}]


def _overlay_traces(overlay: Mapping[str, Sequence[Point]], metric: str,
                    y_title: str) -> list[Trace]:
    traces: list[Trace] = []
    for i, (other, other_points) in enumerate(overlay.items()):
        colour = PALETTE[i % len(PALETTE)]
        traces.append({"type": "scatter", "mode": "lines+markers", "name": other,
                       "x": [p["date"] for p in other_points],
                       "y": [p.get(metric) for p in other_points],
                       "line": {"color": colour}, "marker": {"color": colour, "size": 5},
                       "customdata": [_hover(p) for p in other_points],
                       "hovertemplate": f"{other}<br>%{{customdata}}<br>{y_title} %{{y:.4g}}"
                                        "<extra></extra>"})
    return traces


def _outlier_traces(points: Sequence[Point], metric: str) -> list[Trace]:
    outliers = [p for p in points if "outlier" in p.get("marks", [])]
    if not outliers:
        return []
    return [{"type": "scatter", "mode": "markers", "name": "outlier (not in baselines)",
             "x": [p["date"] for p in outliers], "y": [p.get(metric) for p in outliers],
             "marker": {"symbol": "x-thin-open", "size": 16, "color": "#374151",
                        "line": {"width": 2}}, "hoverinfo": "skip"}]


def _flag_traces(points: Sequence[Point]) -> list[Trace]:
    traces: list[Trace] = []
    for status, (colour, symbol) in _FLAGS.items():
        flagged = [p for p in points if p["status"] == status]
        traces.append({
            "type": "scatter", "mode": "markers+text", "name": status,
            "x": [p["date"] for p in flagged], "y": [p["layerMS"] for p in flagged],
            "text": [f"{p['changePercent']:+.1f} %" for p in flagged],
            "textposition": "top center", "textfont": {"color": colour, "size": 13},
            "marker": {"color": colour, "symbol": symbol, "size": 15,
                       "line": {"width": 1, "color": "white"}},
            "hoverinfo": "skip", "visible": True if flagged else "legendonly",
        })
    return traces


def _top(points: Sequence[Point], buckets: Sequence[Mapping[str, Any]],
         overlay: Mapping[str, Sequence[Point]], metric: str) -> float | None:
    """The highest value drawn: the axis leaves room above it for the flagged points'
    labels (plotly's autorange leaves text out and cut them off)."""
    values = [v for p in points for v in (p.get(metric), p.get("windowMaxMS")
                                          if metric == "layerMS" else None) if v is not None]
    values += [b[metric]["max"] for b in buckets if b.get(metric)]
    values += [p[metric] for ps in overlay.values() for p in ps if p.get(metric) is not None]
    return max(values, default=None)


def history_specs(
    points: Sequence[Point], buckets: Sequence[Mapping[str, Any]] = (),
    changes: Sequence[Mapping[str, Any]] = (), marks: Sequence[Mapping[str, Any]] = (),
    metric: str = "layerMS", overlay: Mapping[str, Sequence[Point]] | None = None,
    name: str = "this case", *, threshold_percent: float,
) -> dict[str, Spec]:
    """The page's two charts: the chosen metric, then layer time (or, when layer time is the
    chosen one, useful throughput), each keyed by its metric's chart key."""
    second = "usefulTFPerGPU" if metric == "layerMS" else "layerMS"
    return {CHART_KEYS[m]: metric_spec(points, buckets, changes, marks, m,
                                       overlay if m == metric else None, name=name,
                                       threshold_percent=threshold_percent)
            for m in (metric, second)}

