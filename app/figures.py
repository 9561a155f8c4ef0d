"""Plotly figure builders: pure functions from plain report data to ``go.Figure``.

Input is what the API gives: case dicts as ``case_out`` returns them (wire fields plus the
derived ones) and the report's ``meta`` dict. Nothing here touches a database or Dash, so
the dashboard and a static HTML export build the very same figures.

Traces and layouts are written as plain plotly dicts and wrapped once, unvalidated:
plotly's per-property validation costs several times the building itself, which a filter
callback redrawing nine charts cannot afford. The tests validate every figure instead.

Every string that comes from a report goes through :func:`text`: plotly renders a small
HTML subset in hover text, legends and titles, and a report's strings must show literally.
"""

from __future__ import annotations

import html
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

Case = dict[str, Any]
Meta = dict[str, Any]
Trace = dict[str, Any]

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
    return html.escape(str(value), quote=False)


def _fmt(value: Any, digits: int = 1, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{unit}"
    return f"{value}{unit}"


def _hover(case: Case, *lines: str) -> str:
    head = (f"<b>{text(case['id'])}</b><br>{text(case['mode'])} · EP{text(case['ep'])} · "
            f"{text(case['precision'])} · {text(case['pipeline'])} · F={text(case['F'])} · "
            f"imbalance {text(case['imbalance'])}")
    return "<br>".join([head, *lines])


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
_AXIS = {"gridcolor": "#e5e5e5", "zerolinecolor": "#cccccc", "linecolor": "#999999",
         "automargin": True}
_TEMPLATE: dict[str, Any] = {"layout": {
    "plot_bgcolor": "white", "paper_bgcolor": "white", "font": {"size": 12},
    "xaxis": _AXIS, "yaxis": _AXIS, "colorway": list(_PALETTE),
}}


def figure(data: Sequence[Trace], layout: dict[str, Any]) -> go.Figure:
    return go.Figure(data=list(data), layout={"template": _TEMPLATE, **layout},
                     _validate=False)


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
    """Cases along an axis in report order, whatever the trace order; ids are long, so
    tick labels show only for small views (hover gives the id)."""
    return {"title": _title("case (report order; hover for id)"), "type": "category",
            "categoryorder": "array", "categoryarray": [text(c["id"]) for c in cases],
            "showticklabels": len(cases) <= 30, **extra}


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


def _scatter(group: Sequence[Case], key: tuple[str, str], y: Sequence[Any],
             hover: Sequence[str], **extra: Any) -> Trace:
    trace: Trace = {
        "type": "scatter", "mode": "markers", "x": [text(c["id"]) for c in group],
        "y": list(y), "name": _series_name(key), "legendgroup": _series_name(key),
        "marker": _marker(key), "hovertext": list(hover), "hoverinfo": "text",
    }
    trace.update(extra)
    return trace


def _per_case(cases: Sequence[Case], value: Callable[[Case], Any],
              hover: Callable[[Case], str]) -> list[Trace]:
    return [_scatter(group, key, [value(c) for c in group], [hover(c) for c in group])
            for key, group in _grouped(cases).items()]


# --- the nine report charts -------------------------------------------------------------


def throughput(cases: Sequence[Case], meta: Meta) -> go.Figure:
    """1. Useful TFLOP/s per GPU per case."""
    data = _per_case(
        cases, lambda c: c.get("usefulTFPerGPU"),
        lambda c: _hover(c, f"useful {_fmt(c.get('usefulTFPerGPU'))} TFLOP/s per GPU",
                         f"layer {_fmt(c.get('layerMS'), 3)} ms"),
    )
    return figure(data, _layout("Useful throughput per GPU", "useful TFLOP/s per GPU",
                                xaxis=_case_axis(cases)))


def percent_of_peak(cases: Sequence[Case], meta: Meta) -> go.Figure:
    """2. % of the case's precision peak, with the 100 % line."""
    peaks = meta.get("theoreticalTFPerGPU") or {}
    data = _per_case(
        cases, lambda c: c.get("percentOfPeak"),
        lambda c: _hover(c, f"{_fmt(c.get('percentOfPeak'))} % of the {text(c['precision'])} "
                            f"peak ({_fmt(peaks.get(c['precision']))} TFLOP/s)",
                         f"useful {_fmt(c.get('usefulTFPerGPU'))} TFLOP/s per GPU"),
    )
    shapes, notes = _hline(100.0, "100 % of peak")
    return figure(data, _layout(
        "Useful throughput as % of the precision's theoretical peak", "% of theoretical peak",
        xaxis=_case_axis(cases), shapes=shapes, annotations=notes))


def _window_range(case: Case) -> tuple[float, float]:
    combined = (case.get("windows") or {}).get("combined") or [case["layerMS"]]
    return case["layerMS"] - min(combined), max(combined) - case["layerMS"]


def layer_time(cases: Sequence[Case], meta: Meta) -> go.Figure:
    """3. Layer time: forward and backward stacked, windows' min-max as error bars."""
    data: list[Trace] = []
    for key, group in _grouped(cases).items():
        x = [text(c["id"]) for c in group]
        name = _series_name(key)
        data.append({
            "type": "bar", "x": x, "y": [c.get("forwardMS") for c in group],
            "name": name + " forward", "legendgroup": name, "marker": _bar_marker(key),
            "hovertext": [_hover(c, f"forward {_fmt(c.get('forwardMS'), 3)} ms")
                          for c in group], "hoverinfo": "text",
        })
        if any(c.get("backwardMS") is not None for c in group):
            data.append({
                "type": "bar", "x": x, "y": [c.get("backwardMS") for c in group],
                "name": name + " backward", "legendgroup": name, "opacity": 0.5,
                "marker": _bar_marker(key),
                "hovertext": [_hover(c, f"backward {_fmt(c.get('backwardMS'), 3)} ms")
                              for c in group], "hoverinfo": "text",
            })
        ranges = [_window_range(c) for c in group]
        data.append({
            "type": "scatter", "mode": "markers", "x": x, "y": [c["layerMS"] for c in group],
            "name": name + " windows min-max", "legendgroup": name, "showlegend": False,
            "marker": {"color": "#222222", "size": 3},
            "error_y": {"type": "data", "symmetric": False, "array": [r[1] for r in ranges],
                        "arrayminus": [r[0] for r in ranges], "color": "#222222",
                        "thickness": 1.2, "width": 3},
            "hovertext": [_hover(c, f"layer {_fmt(c['layerMS'], 3)} ms (median of windows)",
                                 f"windows spread {_fmt(c.get('windowSpreadPercent'), 2)} %")
                          for c in group], "hoverinfo": "text",
        })
    return figure(data, _layout("Layer time: forward + backward (bars: windows min-max)",
                                "time per layer (ms)", xaxis=_case_axis(cases),
                                barmode="stack"))


def nvlink(cases: Sequence[Case], meta: Meta) -> go.Figure:
    """4. NVLink TX and RX: mean over ranks (marker) and max over ranks (error bar top)."""
    data: list[Trace] = []
    for key, group in _grouped(cases).items():
        for direction, open_ in (("TX", False), ("RX", True)):
            mean = [c.get(f"nvlink{direction}GBps") for c in group]
            top = [c.get(f"nvlinkMax{direction}GBps") for c in group]
            up = [t - m if t is not None and m is not None else None
                  for t, m in zip(top, mean, strict=True)]
            hover = [_hover(c, f"{direction} mean {_fmt(m)} GB/s, max {_fmt(t)} GB/s over ranks",
                            f"{_fmt(c.get(f'nvlink{direction}PercentOfPeak'))} % of the "
                            "per-direction peak")
                     for c, m, t in zip(group, mean, top, strict=True)]
            data.append(_scatter(
                group, key, mean, hover, name=f"{_series_name(key)} {direction}",
                marker=_marker(key, open_=open_),
                error_y={"type": "data", "symmetric": False, "array": up,
                         "arrayminus": [0.0] * len(group), "thickness": 1},
            ))
    peak = meta.get("theoreticalNVLinkGBpsPerDirection")
    shapes, notes = _hline(peak, f"per-direction peak {_fmt(peak)} GB/s")
    return figure(data, _layout(
        "NVLink TX (filled) and RX (open): mean over ranks, bar up to the max rank",
        "NVLink GB/s per direction", xaxis=_case_axis(cases), shapes=shapes,
        annotations=notes))


def hbm(cases: Sequence[Case], meta: Meta) -> go.Figure:
    """5. Analytical HBM bandwidth against the HBM peak."""
    data = _per_case(
        cases, lambda c: c.get("analyticalHBMGBps"),
        lambda c: _hover(c, f"analytical HBM {_fmt(c.get('analyticalHBMGBps'))} GB/s",
                         f"{_fmt(c.get('hbmPercentOfPeak'))} % of the HBM peak"),
    )
    peak = meta.get("theoreticalHBMGBps")
    shapes, notes = _hline(peak, f"HBM peak {_fmt(peak)} GB/s")
    return figure(data, _layout("Analytical HBM bandwidth (useful bytes / layer time)",
                                "HBM GB/s", xaxis=_case_axis(cases), shapes=shapes,
                                annotations=notes))


def _saved_stats(case: Case) -> tuple[float, float, float]:
    saved = case["savedBytes"]
    return min(saved) / GIB, sum(saved) / len(saved) / GIB, max(saved) / GIB


def _panel_title(text_: str, x: float, y: float) -> dict[str, Any]:
    return {"text": text_, "xref": "paper", "yref": "paper", "x": x, "y": y,
            "xanchor": "center", "yanchor": "bottom", "showarrow": False,
            "font": {"size": 13}}


def memory(cases: Sequence[Case], meta: Meta) -> go.Figure:
    """6. Peak allocated/reserved GiB; arena slot + scratch; training saved bytes per rank."""
    data: list[Trace] = []
    for key, group in _grouped(cases).items():
        name = _series_name(key)
        peaks_hover = [_hover(c, f"allocated peak {_fmt(c.get('allocatedPeakGiB'), 2)} GiB",
                              f"reserved peak {_fmt(c.get('reservedPeakGiB'), 2)} GiB")
                       for c in group]
        data.append(_scatter(group, key, [c.get("allocatedPeakGiB") for c in group],
                             peaks_hover, name=f"{name} allocated"))
        data.append(_scatter(group, key, [c.get("reservedPeakGiB") for c in group],
                             peaks_hover, name=f"{name} reserved",
                             marker=_marker(key, open_=True)))
        arena_hover = [_hover(c, f"slot {_fmt((c.get('slotBytes') or 0) / GIB, 2)} GiB",
                              f"scratch {_fmt((c.get('scratchBytes') or 0) / GIB, 2)} GiB",
                              f"arena {_fmt((c.get('arenaBytes') or 0) / GIB, 2)} GiB")
                       for c in group]
        for field, opacity in (("slotBytes", 1.0), ("scratchBytes", 0.5)):
            data.append({
                "type": "bar", "x": [text(c["id"]) for c in group],
                "y": [(c.get(field) or 0) / GIB for c in group],
                "name": f"{name} {field[:-5]}", "legendgroup": name, "showlegend": False,
                "opacity": opacity, "marker": _bar_marker(key), "xaxis": "x2", "yaxis": "y2",
                "hovertext": arena_hover, "hoverinfo": "text",
            })
    for key, group in _grouped(c for c in cases if c.get("savedBytes")).items():
        stats = [_saved_stats(c) for c in group]
        hover = [_hover(c, f"saved per rank: min {_fmt(lo, 3)}, mean {_fmt(mid, 3)}, "
                           f"max {_fmt(hi, 3)} GiB", f"{len(c['savedBytes'])} ranks")
                 for c, (lo, mid, hi) in zip(group, stats, strict=True)]
        data.append(_scatter(
            group, key, [mid for _, mid, _ in stats], hover,
            name=f"{_series_name(key)} saved", showlegend=False, xaxis="x3", yaxis="y3",
            error_y={"type": "data", "symmetric": False,
                     "array": [hi - mid for _, mid, hi in stats],
                     "arrayminus": [mid - lo for lo, mid, _ in stats]},
        ))
    axis = _case_axis(cases)
    bare = {**axis, "title": None}
    layout = _layout(
        "Memory", "peak GiB", height=860, barmode="stack",
        xaxis={**bare, "anchor": "y", "matches": "x3"},
        xaxis2={**bare, "anchor": "y2", "matches": "x3"},
        xaxis3={**axis, "anchor": "y3"},
        yaxis={"title": _title("peak GiB"), "domain": [0.7, 0.95]},
        yaxis2={"title": _title("arena GiB"), "domain": [0.36, 0.61]},
        yaxis3={"title": _title("saved GiB per rank"), "domain": [0.0, 0.27]},
        annotations=[
            _panel_title("PyTorch peaks: allocated (filled), reserved (open)", 0.5, 0.95),
            _panel_title("Arena: slot (solid) + scratch (light), stacked", 0.5, 0.61),
            _panel_title("Training saved bytes per rank: mean, bar min-max", 0.5, 0.27),
        ],
    )
    return figure(data, layout)


def routing(cases: Sequence[Case], meta: Meta) -> go.Figure:
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
        "colorbar": {"title": _title("rows"), "x": 0.74},
        "hovertemplate": "%{y}<br>rank %{x}: %{z} rows received<extra></extra>",
    }]
    for key, group in _grouped(cases).items():
        hover = [_hover(c, f"observed imbalance {_fmt(c.get('observedImbalance'), 2)} "
                           "(max / mean received rows)",
                        f"requested imbalance {text(c['imbalance'])}") for c in group]
        data.append({**_scatter(group, key, [text(c["id"]) for c in group], hover),
                     "x": [c.get("observedImbalance") for c in group],
                     "xaxis": "x2", "yaxis": "y2"})
    y_axis = {"type": "category", "categoryorder": "array", "categoryarray": ids,
              "autorange": "reversed", "showticklabels": len(cases) <= 30}
    layout = _layout(
        "Routing: rows received per rank, and the observed imbalance", "case",
        height=max(420, min(1400, 14 * len(cases) + 140)),
        xaxis={"title": _title("rank"), "domain": [0.0, 0.7], "anchor": "y"},
        xaxis2={"title": _title("observed imbalance (max / mean rows)"),
                "domain": [0.8, 1.0], "anchor": "y2"},
        yaxis={**y_axis, "title": _title("case (report order; hover for id)")},
        yaxis2={**y_axis, "matches": "y", "anchor": "x2", "showticklabels": False},
    )
    return figure(data, layout)


_CONFIG_FIELDS = ("mode", "category", "ep", "precision", "pipeline", "F", "imbalance")


def matching_series(cases: Sequence[Case], vary: str) -> list[list[Case]]:
    """Groups of cases equal in every configuration field but ``vary``, with at least two
    distinct values of it, each sorted by ``vary``."""
    groups: dict[tuple[Any, ...], list[Case]] = defaultdict(list)
    for case in cases:
        groups[tuple(case[f] for f in _CONFIG_FIELDS if f != vary)].append(case)
    return [sorted(g, key=lambda c: c[vary]) for g in groups.values()
            if len({c[vary] for c in g}) > 1]


def scaling(cases: Sequence[Case], meta: Meta) -> go.Figure:
    """8. Throughput against F and against EP, each line one matching configuration."""
    data: list[Trace] = []
    shown: set[str] = set()
    for axis, vary in (("", "F"), ("2", "ep")):
        for series in matching_series(cases, vary):
            key = _series_key(series[0])
            name = _series_name(key)
            fixed = ", ".join(f"{f}={text(series[0][f])}" for f in
                              ("mode", "category", "ep", "F", "imbalance") if f != vary)
            hover = [_hover(c, f"useful {_fmt(c.get('usefulTFPerGPU'))} TFLOP/s per GPU",
                            f"series: {fixed}") for c in series]
            data.append({
                **_scatter(series, key, [c.get("usefulTFPerGPU") for c in series], hover),
                "x": [c[vary] for c in series], "mode": "lines+markers",
                "line": {"color": precision_colour(key[0]), "width": 1.5},
                "showlegend": name not in shown, "xaxis": "x" + axis, "yaxis": "y" + axis,
            })
            shown.add(name)
    layout = _layout(
        "Scaling of useful throughput (each line: one matching configuration)",
        "useful TFLOP/s per GPU",
        xaxis={"title": _title("expert width F"), "type": "log", "domain": [0.0, 0.46],
               "anchor": "y", "tickvals": sorted({c["F"] for c in cases})},
        xaxis2={"title": _title("EP (ranks)"), "type": "log", "domain": [0.54, 1.0],
                "anchor": "y2", "tickvals": sorted({c["ep"] for c in cases})},
        yaxis2={"title": _title("useful TFLOP/s per GPU"), "anchor": "x2"},
    )
    return figure(data, layout)


def arithmetic_intensity(cases: Sequence[Case], meta: Meta) -> go.Figure:
    """9. Forward FLOPs per logical payload byte (rank 0) against useful throughput."""
    measured = [c for c in cases if c.get("forwardFlopsPerLogicalPayloadByteRank0")]
    data = []
    for key, group in _grouped(measured).items():
        hover = [_hover(c, f"{_fmt(c['forwardFlopsPerLogicalPayloadByteRank0'])} forward FLOP "
                           "per payload byte",
                        f"useful {_fmt(c.get('usefulTFPerGPU'))} TFLOP/s per GPU")
                 for c in group]
        data.append({**_scatter(group, key, [c.get("usefulTFPerGPU") for c in group], hover),
                     "x": [c["forwardFlopsPerLogicalPayloadByteRank0"] for c in group]})
    return figure(data, _layout(
        "Arithmetic intensity against throughput", "useful TFLOP/s per GPU",
        xaxis={"title": _title("forward FLOP per logical payload byte (rank 0)"),
               "type": "log"}))


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    build: Callable[[Sequence[Case], Meta], go.Figure]
    notes: tuple[str, ...]  # the meta notes that qualify it (placementNote: see below)


# placementNote qualifies every cross-EP comparison: the dashboard adds it to any chart
# whose view spans more than one EP.
CHARTS: tuple[Chart, ...] = (
    Chart("throughput", "Useful TFLOP/s per GPU", throughput, ("timingNote",)),
    Chart("percent-of-peak", "% of peak", percent_of_peak, ("peakNote", "timingNote")),
    Chart("layer-time", "Layer time", layer_time, ("timingNote",)),
    Chart("nvlink", "NVLink TX/RX", nvlink, ("bandwidthNote",)),
    Chart("hbm", "Analytical HBM", hbm, ("bandwidthNote", "timingNote")),
    Chart("memory", "Memory", memory, ("memoryNote",)),
    Chart("routing", "Routing", routing, ()),
    Chart("scaling", "Scaling", scaling, ("timingNote",)),
    Chart("intensity", "Arithmetic intensity", arithmetic_intensity, ("timingNote",)),
)


def report_figures(cases: Sequence[Case], meta: Meta) -> dict[str, go.Figure]:
    return {chart.key: chart.build(cases, meta) for chart in CHARTS}


# --- one case ---------------------------------------------------------------------------


def case_windows(case: Case) -> go.Figure:
    """The timing windows (combined, forward, backward) of one case."""
    windows = case.get("windows") or {}
    data = [{"type": "scatter", "mode": "lines+markers", "name": kind,
             "x": list(range(1, len(windows[kind]) + 1)), "y": windows[kind],
             "hovertemplate": f"{kind} window %{{x}}: %{{y:.4f}} ms<extra></extra>"}
            for kind in ("combined", "forward", "backward") if windows.get(kind)]
    return figure(data, _layout("Timing windows (median iteration time per window)",
                                "time (ms)", height=360,
                                xaxis={"title": _title("window"), "dtick": 1},
                                legend={"title": _title("kind")}))


def _case_bar(case: Case, x: list[Any], y: list[Any], name: str, hover: str) -> Trace:
    return {"type": "bar", "x": x, "y": y, "name": name, "hovertemplate": hover,
            "marker": {"color": precision_colour(str(case["precision"]))}}


def case_receive_rows(case: Case) -> go.Figure:
    rows = case.get("receiveRows") or []
    bar = _case_bar(case, list(range(len(rows))), rows, "received rows",
                    "rank %{x}: %{y} rows<extra></extra>")
    return figure([bar], _layout("Rows received per rank", "rows", height=360,
                                 xaxis={"title": _title("rank")}))


_MEMORY_FIELDS = (
    ("slotBytes", "arena slot"), ("scratchBytes", "arena scratch"), ("arenaBytes", "arena"),
    ("inputBytes", "inputs"), ("hostScratchBytes", "host scratch"),
)


def case_memory(case: Case) -> go.Figure:
    labels = [label for _, label in _MEMORY_FIELDS] + ["allocated peak", "reserved peak"]
    values = [(case.get(f) or 0) / GIB for f, _ in _MEMORY_FIELDS] + [
        case.get("allocatedPeakGiB"), case.get("reservedPeakGiB")]
    bar = _case_bar(case, labels, values, "memory", "%{x}: %{y:.3f} GiB<extra></extra>")
    return figure([bar], _layout("Memory breakdown", "GiB", height=360,
                                 xaxis={"title": _title("accounting view")}))


def case_saved_bytes(case: Case) -> go.Figure:
    saved = case.get("savedBytes") or []
    bar = _case_bar(case, list(range(len(saved))), [s / GIB for s in saved], "saved bytes",
                    "rank %{x}: %{y:.3f} GiB<extra></extra>")
    title = "Saved activations per rank" + ("" if saved else " (none: inference)")
    return figure([bar], _layout(title, "saved GiB", height=360,
                                 xaxis={"title": _title("rank")}))


def case_figures(case: Case) -> dict[str, go.Figure]:
    return {"windows": case_windows(case), "receive-rows": case_receive_rows(case),
            "memory": case_memory(case), "saved-bytes": case_saved_bytes(case)}
