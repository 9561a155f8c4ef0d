"""Plotly figure builders: pure functions from plain report data to ``go.Figure``.

Input is what the API gives: case dicts as ``case_out`` returns them (wire fields plus the
derived ones) and the report's ``meta`` dict. Nothing here touches a database or Dash, so
the dashboard and a static HTML export build the very same figures.

Each chart is first a *spec*, the figure as plain plotly data, then a ``go.Figure`` wrapped
around it unvalidated: plotly's validation and its deep copies cost several times the
building itself, which a filter callback redrawing nine charts cannot afford. The
dashboard hands specs straight to ``dcc.Graph``; the tests validate every figure.

Every string that comes from a report goes through :func:`text`: plotly renders a small
HTML subset in hover text, legends and titles, and a report's strings must show literally.
"""

from __future__ import annotations

import html
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go

Case = dict[str, Any]
Meta = dict[str, Any]
Trace = dict[str, Any]
Spec = dict[str, Any]  # a plotly figure as plain data: {"data": [...], "layout": {...}}

GIB = float(2**30)

_KNOWN_COLOURS = {"bf16": "#1f77b4", "mxfp8": "#d62728", "nvfp4": "#2ca02c", "fp8": "#ff7f0e"}
_PALETTE = ("#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#ff7f0e")
_KNOWN_SYMBOLS = {"standard": "circle", "staged": "square", "mega": "diamond"}
_SYMBOLS = ("triangle-up", "cross", "x", "star", "hexagon", "pentagon", "triangle-down")
_KNOWN_PATTERNS = {"standard": "", "staged": "/", "mega": "x"}
_PATTERNS = ("\\", "-", "|", "+", ".")


def _stable_index(name: str, size: int) -> int:
    # crc32, not hash(): the same name gets the same style in every process and export.
    return zlib.crc32(name.encode("utf-8")) % size


def precision_colour(precision: str) -> str:
    """One colour per precision, the same on every chart and in every process."""
    return _KNOWN_COLOURS.get(precision) or _PALETTE[_stable_index(precision, len(_PALETTE))]


def pipeline_symbol(pipeline: str) -> str:
    """One marker symbol per pipeline, the same on every chart."""
    return _KNOWN_SYMBOLS.get(pipeline) or _SYMBOLS[_stable_index(pipeline, len(_SYMBOLS))]


def pipeline_pattern(pipeline: str) -> str:
    """One bar fill pattern per pipeline (bars cannot carry marker symbols)."""
    known = _KNOWN_PATTERNS.get(pipeline)
    return known if known is not None else _PATTERNS[_stable_index(pipeline, len(_PATTERNS))]


def text(value: Any) -> str:
    """A report's string, escaped so plotly shows it literally instead of as markup."""
    return _escape(str(value))


@lru_cache(maxsize=65536)
def _escape(value: str) -> str:
    # Cached: every chart escapes every case id of the view again.
    return html.escape(value, quote=False)


def _fmt(value: Any, digits: int = 1, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{unit}"
    return f"{value}{unit}"


def _template(*lines: str) -> str:
    """Hover text: the case id (customdata[0], escaped), then the given lines. One template
    per trace instead of a string per point keeps a 5,000-case view small."""
    return "<br>".join(["<b>%{customdata[0]}</b>", *lines]) + "<extra>%{fullData.name}</extra>"


def _series_key(case: Case) -> tuple[str, str]:
    return str(case["precision"]), str(case["pipeline"])


def _series_name(key: tuple[str, str]) -> str:
    return f"{text(key[0])} · {text(key[1])}"


def _grouped(cases: Iterable[Case]) -> dict[tuple[str, str], list[Case]]:
    """Cases by (precision, pipeline), in first-seen order: one trace per style."""
    groups: dict[tuple[str, str], list[Case]] = defaultdict(list)
    for case in cases:
        groups[_series_key(case)].append(case)
    return dict(groups)


def _marker(key: tuple[str, str], *, open_: bool = False, size: int = 9) -> dict[str, Any]:
    colour = precision_colour(key[0])
    return {"color": colour, "symbol": pipeline_symbol(key[1]) + ("-open" if open_ else ""),
            "size": size, "line": {"width": 1, "color": colour}}


def _bar_marker(key: tuple[str, str]) -> dict[str, Any]:
    return {"color": precision_colour(key[0]),
            "pattern": {"shape": pipeline_pattern(key[1]), "fillmode": "overlay"}}


# A small explicit template: plotly's named templates are deep-copied into every figure,
# which costs more than building the figure itself.
# No automargin: plotly measures every tick label and redraws until the margins settle,
# the largest part of drawing a page of charts; the fixed margins fit numeric ticks. Only
# an axis labelled with case ids asks for it (see _case_axis).
# ticklabeloverflow "allow": otherwise plotly measures each tick label after drawing it
# to hide those past the figure's edge, a forced page layout per label.
_AXIS = {"gridcolor": "#e5e5e5", "zerolinecolor": "#cccccc", "linecolor": "#999999",
         "ticklabeloverflow": "allow"}
_TEMPLATE: dict[str, Any] = {"layout": {
    "plot_bgcolor": "white", "paper_bgcolor": "white", "font": {"size": 12},
    # Magnitudes from zero: an axis fitted to two close values makes 1 % look like 2x.
    "xaxis": _AXIS, "yaxis": {**_AXIS, "rangemode": "tozero"}, "colorway": list(_PALETTE),
    # Titles from the left edge: centred, a long one ran under plotly's mode bar.
    "title": {"x": 0, "xref": "paper", "xanchor": "left"},
}}


def figure(data: Sequence[Trace], layout: dict[str, Any], *,
           empty: str | None = None) -> Spec:
    """The spec; ``empty`` is what the chart says in its middle when it has no point to
    draw (no case in view, or none with the charted value): blank axes alone read as a
    drawing failure, or as values of zero."""
    if empty is not None and not _has_points(data):
        note = _muted({"text": empty, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
                       "showarrow": False}, size=14)
        layout = {**layout, "annotations": [*layout.get("annotations", []), note]}
    return {"data": list(data), "layout": {"template": _TEMPLATE, **layout}}


def _muted(annotation: dict[str, Any], size: int = 12) -> dict[str, Any]:
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


def _missing(cases: Sequence[Case], what: str) -> str:
    """The empty chart's message: no case at all, or none with ``what``."""
    return f"no case in view has {what}" if cases else "no case in view"


def to_figure(spec: Spec) -> go.Figure:
    return go.Figure(data=spec["data"], layout=spec["layout"], _validate=False)


def _title(value: str) -> dict[str, str]:
    return {"text": value}


def _layout(title: str, y_title: str, *, height: int = 420, **extra: Any) -> dict[str, Any]:
    return {
        "title": _title(title), "height": height,
        "margin": {"l": 70, "r": 20, "t": 50, "b": 60},
        "legend": {"title": _title("precision · pipeline")},
        "hoverlabel": {"align": "left"}, "yaxis": {"title": _title(y_title)}, **extra,
    }


def _case_axis(cases: Sequence[Case], **extra: Any) -> dict[str, Any]:
    """Cases along x by their position in the view, in report order; ids are long, so they
    label the ticks of small views only (hover gives the id)."""
    axis: dict[str, Any] = {"title": _title("case, in view order (hover for the id)"),
                            "zeroline": False, "showticklabels": len(cases) <= 30}
    if len(cases) <= 30:
        axis.update(tickvals=list(range(len(cases))), ticktext=[text(c["id"]) for c in cases],
                    tickangle=-40, automargin=True)
    return {**axis, **extra}


def _hline(y: float | None, label: str, yref: str = "y") -> tuple[list[Any], list[Any]]:
    """A dashed reference line across the plot, as (shapes, annotations)."""
    if y is None:
        return [], []
    xref = "x domain" if yref == "y" else f"x{yref[1:]} domain"
    shape = {"type": "line", "xref": xref, "x0": 0, "x1": 1, "yref": yref, "y0": y, "y1": y,
             "line": {"dash": "dash", "color": "#444444", "width": 1.5}}
    note = {"xref": xref, "x": 0, "yref": yref, "y": y, "text": label, "showarrow": False,
            "xanchor": "left", "yanchor": "bottom", "font": {"color": "#444444"}}
    return [shape], [note]


def _positions(cases: Sequence[Case]) -> dict[str, int]:
    return {str(c["id"]): i for i, c in enumerate(cases)}


def _custom(group: Sequence[Case], *values: Callable[[Case], Any]) -> list[list[Any]]:
    return [[text(c["id"]), *(v(c) for v in values)] for c in group]


def _scatter(group: Sequence[Case], key: tuple[str, str], x: Sequence[Any], y: Sequence[Any],
             custom: list[list[Any]], template: str, **extra: Any) -> Trace:
    trace: Trace = {
        "type": "scatter", "mode": "markers", "x": list(x), "y": list(y),
        "name": _series_name(key), "legendgroup": _series_name(key), "marker": _marker(key),
        "customdata": custom, "hovertemplate": template,
    }
    trace.update(extra)
    return trace


def _per_case(cases: Sequence[Case], value: Callable[[Case], Any], template: str,
              *custom: Callable[[Case], Any]) -> list[Trace]:
    pos = _positions(cases)
    return [_scatter(group, key, [pos[str(c["id"])] for c in group], [value(c) for c in group],
                     _custom(group, *custom), template)
            for key, group in _grouped(cases).items()]


# --- the nine report charts -------------------------------------------------------------


def throughput_spec(cases: Sequence[Case], meta: Meta) -> Spec:
    """1. Useful TFLOP/s per GPU per case."""
    data = _per_case(
        cases, lambda c: c.get("usefulTFPerGPU"),
        _template("useful %{y:,.1f} TFLOP/s per GPU", "layer %{customdata[1]:.3f} ms"),
        lambda c: c.get("layerMS"),
    )
    return figure(data, _layout("Useful throughput per GPU", "useful TFLOP/s per GPU",
                                xaxis=_case_axis(cases)),
                  empty=_missing(cases, "a useful throughput"))


def percent_of_peak_spec(cases: Sequence[Case], meta: Meta) -> Spec:
    """2. % of the case's precision peak, with the 100 % line."""
    peaks = meta.get("theoreticalTFPerGPU") or {}
    data = _per_case(
        cases, lambda c: c.get("percentOfPeak"),
        _template("%{y:.1f} % of the precision's peak (%{customdata[2]:,} TFLOP/s)",
                  "useful %{customdata[1]:,.1f} TFLOP/s per GPU"),
        lambda c: c.get("usefulTFPerGPU"), lambda c: peaks.get(c["precision"]),
    )
    shapes, notes = _hline(100.0, "100 % of peak")
    return figure(data, _layout(
        "Useful throughput as % of the precision's theoretical peak", "% of theoretical peak",
        xaxis=_case_axis(cases), shapes=shapes, annotations=notes),
        empty=_missing(cases, "a theoretical peak for its precision"))


def _window_range(case: Case) -> tuple[float, float]:
    combined = (case.get("windows") or {}).get("combined") or [case["layerMS"]]
    return case["layerMS"] - min(combined), max(combined) - case["layerMS"]


def layer_time_spec(cases: Sequence[Case], meta: Meta) -> Spec:
    """3. Layer time: forward and backward stacked, windows' min-max as error bars."""
    pos = _positions(cases)
    data: list[Trace] = []
    for key, group in _grouped(cases).items():
        x = [pos[str(c["id"])] for c in group]
        name = _series_name(key)
        ids = _custom(group)
        data.append({
            "type": "bar", "x": x, "y": [c.get("forwardMS") for c in group],
            "name": name + " forward", "legendgroup": name, "marker": _bar_marker(key),
            "customdata": ids, "hovertemplate": _template("forward %{y:.3f} ms"),
        })
        if any(c.get("backwardMS") is not None for c in group):
            data.append({
                "type": "bar", "x": x, "y": [c.get("backwardMS") for c in group],
                "name": name + " backward", "legendgroup": name, "opacity": 0.5,
                "marker": _bar_marker(key), "customdata": ids,
                "hovertemplate": _template("backward %{y:.3f} ms"),
            })
        ranges = [_window_range(c) for c in group]
        data.append({
            "type": "scatter", "mode": "markers", "x": x, "y": [c["layerMS"] for c in group],
            "name": name + " windows min-max", "legendgroup": name, "showlegend": False,
            "marker": {"color": "#222222", "size": 3},
            "error_y": {"type": "data", "symmetric": False, "array": [r[1] for r in ranges],
                        "arrayminus": [r[0] for r in ranges], "color": "#222222",
                        "thickness": 1.2, "width": 3},
            "customdata": _custom(group, lambda c: c.get("windowSpreadPercent")),
            "hovertemplate": _template("layer %{y:.3f} ms (median of windows)",
                                       "windows spread %{customdata[1]:.2f} %"),
        })
    return figure(data, _layout("Layer time: forward + backward (bars: windows min-max)",
                                "time per layer (ms)", xaxis=_case_axis(cases),
                                barmode="stack"), empty=_missing(cases, "a layer time"))


def nvlink_spec(cases: Sequence[Case], meta: Meta) -> Spec:
    """4. NVLink TX and RX: mean over ranks (marker) and max over ranks (error bar top)."""
    pos = _positions(cases)
    data: list[Trace] = []
    for key, group in _grouped(cases).items():
        x = [pos[str(c["id"])] for c in group]
        for direction, open_ in (("TX", False), ("RX", True)):
            mean = [c.get(f"nvlink{direction}GBps") for c in group]
            top = [c.get(f"nvlinkMax{direction}GBps") for c in group]
            up = [t - m if t is not None and m is not None else None
                  for t, m in zip(top, mean, strict=True)]
            custom = [[text(c["id"]), c.get(f"nvlinkMax{direction}GBps"),
                       c.get(f"nvlink{direction}PercentOfPeak")] for c in group]
            data.append(_scatter(
                group, key, x, mean, custom,
                _template(f"{direction} mean %{{y:,.1f}} GB/s, max %{{customdata[1]:,.1f}} "
                          "GB/s over ranks",
                          "%{customdata[2]:.1f} % of the per-direction peak"),
                name=f"{_series_name(key)} {direction}", marker=_marker(key, open_=open_),
                error_y={"type": "data", "symmetric": False, "array": up,
                         "arrayminus": [0.0] * len(group), "thickness": 1},
            ))
    peak = meta.get("theoreticalNVLinkGBpsPerDirection")
    shapes, notes = _hline(peak, f"per-direction peak {_fmt(peak)} GB/s")
    return figure(data, _layout(
        "NVLink TX (filled) and RX (open): mean over ranks, bar up to the max rank",
        "NVLink GB/s per direction", xaxis=_case_axis(cases), shapes=shapes,
        annotations=notes), empty=_missing(cases, "NVLink counters"))


def hbm_spec(cases: Sequence[Case], meta: Meta) -> Spec:
    """5. Analytical HBM bandwidth against the HBM peak."""
    data = _per_case(
        cases, lambda c: c.get("analyticalHBMGBps"),
        _template("analytical HBM %{y:,.1f} GB/s", "%{customdata[1]:.1f} % of the HBM peak"),
        lambda c: c.get("hbmPercentOfPeak"),
    )
    peak = meta.get("theoreticalHBMGBps")
    shapes, notes = _hline(peak, f"HBM peak {_fmt(peak)} GB/s")
    return figure(data, _layout("Analytical HBM bandwidth (useful bytes / layer time)",
                                "HBM GB/s", xaxis=_case_axis(cases), shapes=shapes,
                                annotations=notes),
                  empty=_missing(cases, "an analytical HBM bandwidth"))


def _saved_stats(case: Case) -> tuple[float, float, float]:
    saved = case["savedBytes"]
    return min(saved) / GIB, sum(saved) / len(saved) / GIB, max(saved) / GIB


def _panel_title(text_: str, x: float, y: float) -> dict[str, Any]:
    return {"text": text_, "xref": "paper", "yref": "paper", "x": x, "y": y,
            "xanchor": "center", "yanchor": "bottom", "showarrow": False,
            "font": {"size": 13}}


def memory_spec(cases: Sequence[Case], meta: Meta) -> Spec:
    """6. Peak allocated/reserved GiB; arena slot + scratch; training saved bytes per rank."""
    pos = _positions(cases)
    data: list[Trace] = []
    peaks = _template("allocated peak %{customdata[1]:.2f} GiB",
                      "reserved peak %{customdata[2]:.2f} GiB")
    for key, group in _grouped(cases).items():
        name = _series_name(key)
        x = [pos[str(c["id"])] for c in group]
        custom = _custom(group, lambda c: c.get("allocatedPeakGiB"),
                         lambda c: c.get("reservedPeakGiB"))
        data.append(_scatter(group, key, x, [c.get("allocatedPeakGiB") for c in group],
                             custom, peaks, name=f"{name} allocated"))
        data.append(_scatter(group, key, x, [c.get("reservedPeakGiB") for c in group],
                             custom, peaks, name=f"{name} reserved",
                             marker=_marker(key, open_=True)))
        arena = _custom(group, lambda c: (c.get("slotBytes") or 0) / GIB,
                        lambda c: (c.get("scratchBytes") or 0) / GIB,
                        lambda c: (c.get("arenaBytes") or 0) / GIB)
        for field, opacity in (("slotBytes", 1.0), ("scratchBytes", 0.5)):
            data.append({
                # A missing size draws no bar: a bar of 0 GiB would claim a measurement.
                "type": "bar", "x": x,
                "y": [None if c.get(field) is None else c[field] / GIB for c in group],
                "name": f"{name} {field[:-5]}", "legendgroup": name, "showlegend": False,
                "opacity": opacity, "marker": _bar_marker(key), "xaxis": "x2", "yaxis": "y2",
                "customdata": arena, "hovertemplate": _template(
                    "slot %{customdata[1]:.2f} GiB", "scratch %{customdata[2]:.2f} GiB",
                    "arena %{customdata[3]:.2f} GiB"),
            })
    for key, group in _grouped(c for c in cases if c.get("savedBytes")).items():
        stats = [_saved_stats(c) for c in group]
        custom = [[text(c["id"]), lo, hi, len(c["savedBytes"])]
                  for c, (lo, _, hi) in zip(group, stats, strict=True)]
        data.append(_scatter(
            group, key, [pos[str(c["id"])] for c in group], [mid for _, mid, _ in stats],
            custom, _template("saved per rank: mean %{y:.3f} GiB, min %{customdata[1]:.3f}, "
                              "max %{customdata[2]:.3f}", "%{customdata[3]} ranks"),
            name=f"{_series_name(key)} saved", showlegend=False, xaxis="x3", yaxis="y3",
            error_y={"type": "data", "symmetric": False,
                     "array": [hi - mid for _, mid, hi in stats],
                     "arrayminus": [mid - lo for lo, mid, _ in stats]},
        ))
    axis = _case_axis(cases)
    # The panels share the case axis; only the bottom one labels it (a label under an
    # upper panel would run into the panel below).
    bare = {**axis, "title": None, "showticklabels": False}
    annotations = [
        _panel_title("PyTorch peaks: allocated (filled), reserved (open)", 0.5, 0.95),
        _panel_title("Arena: slot (solid) + scratch (light), stacked", 0.5, 0.61),
        _panel_title("Training saved bytes per rank: mean, bar min-max", 0.5, 0.27),
    ]
    empty_panels = (
        (("allocatedPeakGiB", "reservedPeakGiB"), _missing(cases, "PyTorch peaks"), 0.8),
        (("slotBytes", "scratchBytes"), _missing(cases, "arena sizes"), 0.46),
    )
    for fields, message, y in empty_panels:
        if not any(c.get(f) is not None for c in cases for f in fields):
            annotations.append(_muted(_panel_title(message, 0.5, y)))
    if not any(c.get("savedBytes") for c in cases):
        annotations.append(_muted(_panel_title("no training case in view", 0.5, 0.12)))
    layout = _layout(
        "Memory", "peak GiB", height=860, barmode="stack",
        xaxis={**bare, "anchor": "y", "matches": "x3"},
        xaxis2={**bare, "anchor": "y2", "matches": "x3"},
        xaxis3={**axis, "anchor": "y3"},
        yaxis={"title": _title("peak GiB"), "domain": [0.7, 0.95]},
        yaxis2={"title": _title("arena GiB"), "domain": [0.36, 0.61]},
        yaxis3={"title": _title("saved GiB per rank"), "domain": [0.0, 0.27]},
        annotations=annotations,
    )
    return figure(data, layout)


def routing_spec(cases: Sequence[Case], meta: Meta) -> Spec:
    """7. Received rows per rank (heatmap case x rank) and the observed imbalance."""
    ranks = max((len(c.get("receiveRows") or []) for c in cases), default=0)
    ids = [text(c["id"]) for c in cases]
    z = []
    for c in cases:
        rows = c.get("receiveRows") or []
        z.append([rows[r] if r < len(rows) else None for r in range(ranks)])
    data: list[Trace] = [{
        "type": "heatmap", "z": z, "x": list(range(ranks)), "y": ids, "name": "received rows",
        "colorscale": "Viridis", "hoverongaps": False, "xaxis": "x", "yaxis": "y",
        # Between the panels, clear of both: the heatmap ends at 0.64, the dots start at 0.8.
        "colorbar": {"title": _title("rows"), "x": 0.66, "xanchor": "left", "thickness": 14,
                     "ticklabeloverflow": "allow"},
        "hovertemplate": "<b>%{y}</b><br>rank %{x}: %{z} rows received<extra></extra>",
    }]
    for key, group in _grouped(cases).items():
        data.append(_scatter(
            group, key, [c.get("observedImbalance") for c in group],
            [text(c["id"]) for c in group], _custom(group, lambda c: c["imbalance"]),
            _template("observed imbalance %{x:.2f} (max / mean received rows)",
                      "requested imbalance %{customdata[1]}"),
            xaxis="x2", yaxis="y2"))
    y_axis = {"type": "category", "categoryorder": "array", "categoryarray": ids,
              "autorange": "reversed", "showticklabels": len(cases) <= 30,
              "automargin": len(cases) <= 30}
    layout = _layout(
        "Routing: rows received per rank, and the observed imbalance", "case",
        height=max(420, min(1400, 14 * len(cases) + 140)),
        xaxis={"title": _title("rank"), "domain": [0.0, 0.64], "anchor": "y"},
        xaxis2={"title": _title("imbalance (max / mean rows)"),
                "domain": [0.8, 1.0], "anchor": "y2"},
        yaxis={**y_axis, "title": _title("case, in view order (hover for the id)")},
        yaxis2={**y_axis, "matches": "y", "anchor": "x2", "showticklabels": False},
    )
    return figure(data, layout, empty=_missing(cases, "received rows per rank"))


_CONFIG_FIELDS = ("mode", "category", "ep", "precision", "pipeline", "F", "imbalance")


def matching_series(cases: Sequence[Case], vary: str) -> list[list[Case]]:
    """Groups of cases equal in every configuration field but ``vary``, with at least two
    distinct values of it, each sorted by ``vary``."""
    groups: dict[tuple[Any, ...], list[Case]] = defaultdict(list)
    for case in cases:
        groups[tuple(case[f] for f in _CONFIG_FIELDS if f != vary)].append(case)
    return [sorted(g, key=lambda c: c[vary]) for g in groups.values()
            if len({c[vary] for c in g}) > 1]


def scaling_spec(cases: Sequence[Case], meta: Meta) -> Spec:
    """8. Throughput against F and against EP, each line one matching configuration.

    One trace per style and axis, its configurations' lines separated by gaps (``None``),
    not one trace per configuration: plotly's drawing time grows with the trace count."""
    data: list[Trace] = []
    shown: set[str] = set()
    for axis, vary in (("", "F"), ("2", "ep")):
        lines: dict[tuple[str, str], list[list[Case]]] = defaultdict(list)
        for series in matching_series(cases, vary):
            lines[_series_key(series[0])].append(series)
        for key, styled in lines.items():
            name = _series_name(key)
            x: list[Any] = []
            y: list[Any] = []
            custom: list[list[Any]] = []
            for series in styled:
                if x:
                    x.append(None)
                    y.append(None)
                    custom.append([None, None])
                fixed = ", ".join(f"{f}={text(series[0][f])}" for f in
                                  ("mode", "category", "ep", "F", "imbalance") if f != vary)
                x.extend(c[vary] for c in series)
                y.extend(c.get("usefulTFPerGPU") for c in series)
                custom.extend([text(c["id"]), fixed] for c in series)
            flat = [c for series in styled for c in series]
            data.append(_scatter(
                flat, key, x, y, custom,
                _template("useful %{y:,.1f} TFLOP/s per GPU", f"{vary}=%{{x}}",
                          "series: %{customdata[1]}"),
                mode="lines+markers", line={"color": precision_colour(key[0]), "width": 1.5},
                connectgaps=False, showlegend=name not in shown, xaxis="x" + axis,
                yaxis="y" + axis,
            ))
            shown.add(name)
    # A panel without a line keeps its axes and says why it is empty.
    annotations = []
    for axis, label, middle in (("", "F", 0.23), ("2", "EP", 0.77)):
        if not any(t.get("xaxis") == "x" + axis for t in data):
            data.append({"type": "scatter", "x": [], "y": [], "showlegend": False,
                         "hoverinfo": "skip", "xaxis": "x" + axis, "yaxis": "y" + axis})
            annotations.append(_muted({
                **_panel_title(f"no cases in view differ only in {label}", middle, 0.5),
                "yanchor": "middle"}))
    layout = _layout(
        "Scaling of useful throughput (each line: one matching configuration)",
        "useful TFLOP/s per GPU", annotations=annotations,
        xaxis={"title": _title("expert width F"), "type": "log", "domain": [0.0, 0.46],
               "anchor": "y", "tickvals": sorted({c["F"] for c in cases})},
        xaxis2={"title": _title("EP (ranks)"), "type": "log", "domain": [0.54, 1.0],
                "anchor": "y2", "tickvals": sorted({c["ep"] for c in cases})},
        yaxis2={"title": _title("useful TFLOP/s per GPU"), "anchor": "x2"},
    )
    return figure(data, layout)


def arithmetic_intensity_spec(cases: Sequence[Case], meta: Meta) -> Spec:
    """9. Forward FLOPs per logical payload byte (rank 0) against useful throughput."""
    measured = [c for c in cases if c.get("forwardFlopsPerLogicalPayloadByteRank0")]
    data = [_scatter(group, key, [c["forwardFlopsPerLogicalPayloadByteRank0"] for c in group],
                     [c.get("usefulTFPerGPU") for c in group], _custom(group),
                     _template("%{x:,.0f} forward FLOP per logical payload byte",
                               "useful %{y:,.1f} TFLOP/s per GPU"))
            for key, group in _grouped(measured).items()]
    return figure(data, _layout(
        "Arithmetic intensity against throughput", "useful TFLOP/s per GPU",
        xaxis={"title": _title("forward FLOP per logical payload byte (rank 0)"),
               "type": "log"}),
        empty=_missing(cases, "forward FLOP per logical payload byte"))


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    spec: Callable[[Sequence[Case], Meta], Spec]
    notes: tuple[str, ...]  # the meta notes that qualify it (placementNote: see below)

    def make(self, cases: Sequence[Case], meta: Meta, *, legend: bool = True) -> Spec:
        """The chart's spec; ``legend=False`` for a page that shows one shared legend of
        the styles instead (plotly lays out each legend anew, a large part of drawing)."""
        spec = self.spec(cases, meta)
        if not legend:
            spec["layout"]["showlegend"] = False
        return spec

    def build(self, cases: Sequence[Case], meta: Meta, *, legend: bool = True) -> go.Figure:
        return to_figure(self.make(cases, meta, legend=legend))


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
    Chart("scaling", "Scaling", scaling_spec, ("timingNote",)),
    Chart("intensity", "Arithmetic intensity", arithmetic_intensity_spec, ("timingNote",)),
)


def report_figures(cases: Sequence[Case], meta: Meta) -> dict[str, go.Figure]:
    return {chart.key: chart.build(cases, meta) for chart in CHARTS}


# --- one case ---------------------------------------------------------------------------


def case_windows_spec(case: Case) -> Spec:
    """The timing windows (combined, forward, backward) of one case."""
    windows = case.get("windows") or {}
    data = [{"type": "scatter", "mode": "lines+markers", "name": kind,
             "x": list(range(1, len(windows[kind]) + 1)), "y": windows[kind],
             "hovertemplate": f"{kind} window %{{x}}: %{{y:.4f}} ms<extra></extra>"}
            for kind in ("combined", "forward", "backward") if windows.get(kind)]
    return figure(data, _layout("Timing windows (per iteration)",
                                "time (ms)", height=360,
                                xaxis={"title": _title("window"), "dtick": 1},
                                legend={"title": _title("kind")}))


def _case_bar(case: Case, x: list[Any], y: list[Any], name: str, hover: str) -> Trace:
    return {"type": "bar", "x": x, "y": y, "name": name, "hovertemplate": hover,
            "marker": {"color": precision_colour(str(case["precision"]))}}


def case_receive_rows_spec(case: Case) -> Spec:
    rows = case.get("receiveRows") or []
    bar = _case_bar(case, list(range(len(rows))), rows, "received rows",
                    "rank %{x}: %{y} rows<extra></extra>")
    return figure([bar], _layout("Rows received per rank", "rows", height=360,
                                 xaxis={"title": _title("rank")}))


_MEMORY_FIELDS = (
    ("slotBytes", "arena slot"), ("scratchBytes", "arena scratch"), ("arenaBytes", "arena"),
    ("inputBytes", "inputs"), ("hostScratchBytes", "host scratch"),
)


def case_memory_spec(case: Case) -> Spec:
    labels = [label for _, label in _MEMORY_FIELDS] + ["allocated peak", "reserved peak"]
    # A size the runner did not measure draws no bar, rather than one of 0 GiB.
    values = [None if case.get(f) is None else case[f] / GIB for f, _ in _MEMORY_FIELDS] + [
        case.get("allocatedPeakGiB"), case.get("reservedPeakGiB")]
    bar = _case_bar(case, labels, values, "memory", "%{x}: %{y:.3f} GiB<extra></extra>")
    return figure([bar], _layout("Memory breakdown", "GiB", height=360,
                                 xaxis={"title": _title("accounting view")}))


def case_saved_bytes_spec(case: Case) -> Spec:
    saved = case.get("savedBytes") or []
    bar = _case_bar(case, list(range(len(saved))), [s / GIB for s in saved], "saved bytes",
                    "rank %{x}: %{y:.3f} GiB<extra></extra>")
    title = "Saved activations per rank" + ("" if saved else " (none: inference)")
    return figure([bar], _layout(title, "saved GiB", height=360,
                                 xaxis={"title": _title("rank")}))


def case_figures(case: Case) -> dict[str, go.Figure]:
    return {key: to_figure(spec) for key, spec in case_specs(case).items()}


def case_specs(case: Case) -> dict[str, Spec]:
    return {"windows": case_windows_spec(case), "receive-rows": case_receive_rows_spec(case),
            "memory": case_memory_spec(case), "saved-bytes": case_saved_bytes_spec(case)}


def case_windows(case: Case) -> go.Figure:
    return to_figure(case_windows_spec(case))
