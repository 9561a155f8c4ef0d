"""The report charts of several panels: memory (three panels on one case axis), routing
(heatmap beside the imbalance) and scaling (against F and against EP)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from app.case_fields import FILTERABLE
from app.case_view import CaseView
from app.figures.configuration import configuration, placement
from app.figures.layout import (
    case_frame,
    chart_layout,
    figure,
    missing,
    muted,
    panel_title,
    titled,
)
from app.figures.point_key import numbered, numbers_of, point_numbers
from app.figures.style import (
    GIB,
    Meta,
    Spec,
    Trace,
    bar_marker,
    grouped,
    marker,
    precision_colour,
    series_key,
    series_name,
    text,
)
from app.figures.traces import hover, hover_data, hover_id, scatter


def _saved_stats(case: CaseView) -> tuple[float, float, float]:
    saved = case.savedBytes
    return min(saved) / GIB, sum(saved) / len(saved) / GIB, max(saved) / GIB


def _memory_traces(cases: Sequence[CaseView], pos: dict[str, float], width: float
                   ) -> list[Trace]:
    """The peaks (top panel) and the arena's slot and scratch (middle panel)."""
    data: list[Trace] = []
    peaks = hover("allocated peak %{customdata[1]:.2f} GiB",
                  "reserved peak %{customdata[2]:.2f} GiB")
    for key, group in grouped(cases).items():
        name = series_name(key)
        x = [pos[c.id] for c in group]
        custom = hover_data(group, lambda c: c.allocatedPeakGiB,
                            lambda c: c.reservedPeakGiB)
        data.append(scatter(group, key, x, [c.allocatedPeakGiB for c in group],
                            custom, peaks, name=f"{name} allocated"))
        data.append(scatter(group, key, x, [c.reservedPeakGiB for c in group],
                            custom, peaks, name=f"{name} reserved",
                            marker=marker(key, open_=True)))
        arena = hover_data(group, lambda c: (c.slotBytes or 0) / GIB,
                           lambda c: (c.scratchBytes or 0) / GIB,
                           lambda c: (c.arenaBytes or 0) / GIB)
        for field, opacity in (("slotBytes", 1.0), ("scratchBytes", 0.5)):
            data.append({
                # A missing size draws no bar: a bar of 0 GiB would claim a measurement.
                "type": "bar", "x": x, "width": width,
                "y": [None if (size := c.number(field)) is None else size / GIB for c in group],
                "name": f"{name} {field[:-5]}", "legendgroup": name, "showlegend": False,
                "opacity": opacity, "marker": bar_marker(key), "xaxis": "x2", "yaxis": "y2",
                "customdata": arena, "hovertemplate": hover(
                    "slot %{customdata[1]:.2f} GiB", "scratch %{customdata[2]:.2f} GiB",
                    "arena %{customdata[3]:.2f} GiB"),
            })
    return data


def _saved_traces(cases: Sequence[CaseView], pos: dict[str, float]) -> list[Trace]:
    """Training's saved bytes per rank (bottom panel): the mean, a bar from min to max."""
    data: list[Trace] = []
    for key, group in grouped(c for c in cases if c.savedBytes).items():
        stats = [_saved_stats(c) for c in group]
        custom = [[hover_id(c), lo, hi, len(c.savedBytes)]
                  for c, (lo, _, hi) in zip(group, stats, strict=True)]
        data.append(scatter(
            group, key, [pos[c.id] for c in group], [mid for _, mid, _ in stats],
            custom, hover("saved per rank: mean %{y:.3f} GiB, min %{customdata[1]:.3f}, "
                          "max %{customdata[2]:.3f}", "%{customdata[3]} ranks"),
            name=f"{series_name(key)} saved", showlegend=False, xaxis="x3", yaxis="y3",
            error_y={"type": "data", "symmetric": False,
                     "array": [hi - mid for _, mid, hi in stats],
                     "arrayminus": [mid - lo for lo, mid, _ in stats]},
        ))
    return data


def _memory_annotations(cases: Sequence[CaseView], domains: list[list[float]], saved: bool
                        ) -> list[dict[str, Any]]:
    """Each panel's title; a panel with nothing to draw says what is missing."""
    annotations = [
        panel_title("PyTorch peaks: allocated (filled), reserved (open)", 0.5, domains[0][1]),
        panel_title("Arena: slot (solid) + scratch (light), stacked", 0.5, domains[1][1]),
        *([panel_title("Training saved bytes per rank: mean, bar min-max", 0.5,
                       domains[2][1])] if saved else []),
    ]
    empty_panels = (
        (("allocatedPeakGiB", "reservedPeakGiB"), missing(cases, "PyTorch peaks"), domains[0]),
        (("slotBytes", "scratchBytes"), missing(cases, "arena sizes"), domains[1]),
    )
    for fields, message, (low, high) in empty_panels:
        if not any(c.value(f) is not None for c in cases for f in fields):
            annotations.append(muted(panel_title(message, 0.5, (low + high) / 2)))
    return annotations


def memory_spec(cases: Sequence[CaseView], meta: Meta) -> Spec:
    """6. Peak allocated/reserved GiB; arena slot + scratch; training saved bytes per rank."""
    place = placement(cases)
    data = [*_memory_traces(cases, place.x, place.width * 0.92),
            *_saved_traces(cases, place.x)]
    # The saved-bytes panel only where a training case is in view: an inference-only view
    # leaves it out and the title says why, rather than drawing an empty panel.
    saved = any(c.savedBytes for c in cases)
    domains: list[list[float]] = ([[0.7, 0.95], [0.36, 0.61], [0.0, 0.27]] if saved
                                  else [[0.55, 0.95], [0.0, 0.4]])
    bottom = "x3" if saved else "x2"
    frame = case_frame(cases, annotations=_memory_annotations(cases, domains, saved),
                       axis=bottom)
    axis = frame.pop("xaxis")
    # The panels share the case axis; only the bottom one labels it (a label under an
    # upper panel would run into the panel below).
    bare = {**axis, "title": None, "showticklabels": False}
    axes: dict[str, Any] = {
        "xaxis": {**bare, "anchor": "y", "matches": bottom},
        "yaxis": {"title": titled("peak GiB"), "domain": domains[0]},
        "xaxis2": ({**bare, "anchor": "y2", "matches": "x3"} if saved
                   else {**axis, "anchor": "y2"}),
        "yaxis2": {"title": titled("arena GiB"), "domain": domains[1]},
    }
    if saved:
        axes.update(xaxis3={**axis, "anchor": "y3"},
                    yaxis3={"title": titled("saved GiB per rank"), "domain": domains[2]})
    title = "Memory" if saved else (
        "Memory (saved activations left out: no training case in view)")
    layout = chart_layout(title, "peak GiB", height=860 if saved else 620, barmode="stack",
                          **frame, **axes)
    return figure(data, layout)


def routing_spec(cases: Sequence[CaseView], meta: Meta) -> Spec:
    """7. Received rows per rank (heatmap case x rank) and the observed imbalance."""
    ranks = max((len(c.receiveRows) for c in cases), default=0)
    place = placement(cases)
    cases = sorted(cases, key=lambda c: place.x[c.id])  # as on the other charts
    label = _routing_labels(cases, len({c.category for c in place.configurations}) > 1)
    ids = [label[c.id] for c in cases]
    z = []
    for c in cases:
        rows = c.receiveRows
        z.append([rows[r] if r < len(rows) else None for r in range(ranks)])
    data: list[Trace] = [{
        "type": "heatmap", "z": z, "x": list(range(ranks)), "y": ids, "name": "received rows",
        "colorscale": "Viridis", "hoverongaps": False, "xaxis": "x", "yaxis": "y",
        # Between the panels, clear of both: the heatmap ends at 0.64, the dots start at 0.8.
        "colorbar": {"title": titled("rows"), "x": 0.66, "xanchor": "left", "thickness": 14,
                     "ticklabeloverflow": "allow"},
        # The row's label names its case (the id where two would share one); the case id on
        # every cell (customdata) made this chart 1.5 MB of a 5,000-case view's 2.2 MB.
        "hovertemplate": "<b>%{y}</b><br>rank %{x}: %{z} rows received<extra></extra>",
    }]
    for key, group in grouped(cases).items():
        data.append(scatter(
            group, key, [c.observedImbalance for c in group],
            [label[c.id] for c in group], hover_data(group, lambda c: c.imbalance),
            hover("observed imbalance %{x:.2f} (max / mean received rows)",
                  "requested imbalance %{customdata[1]}"),
            xaxis="x2", yaxis="y2"))
    labelled = len(cases) <= 80
    y_axis = {"type": "category", "categoryorder": "array", "categoryarray": ids,
              "autorange": "reversed", "showticklabels": labelled, "automargin": labelled,
              "tickfont": {"size": 10}}
    layout = chart_layout(
        "Routing: rows received per rank, and the observed imbalance", "case",
        height=max(420, min(1400, 14 * len(cases) + 140)),
        xaxis={"title": titled("rank"), "domain": [0.0, 0.64], "anchor": "y"},
        xaxis2={"title": titled("imbalance (max / mean rows)"),
                "domain": [0.8, 1.0], "anchor": "y2"},
        yaxis={**y_axis, "title": titled(
            "case: mode, configuration, precision pipeline" if labelled
            else "case (too many to label: hover names each)")},
        yaxis2={**y_axis, "matches": "y", "anchor": "x2", "showticklabels": False},
    )
    return figure(data, layout, empty=missing(cases, "received rows per rank"))


def _routing_labels(cases: Sequence[CaseView], with_category: bool) -> dict[str, str]:
    """Case id -> ``training EP32 F3072 i1 · bf16 standard``; the id where two would
    share a label (a heatmap row per label)."""
    labels = {c.id: text(f"{c.mode} {configuration(c).label(with_category)} · "
                                 f"{c.precision} {c.pipeline}") for c in cases}
    seen: dict[str, int] = defaultdict(int)
    for value in labels.values():
        seen[value] += 1
    return {case_id: value if seen[value] == 1 else text(case_id)
            for case_id, value in labels.items()}


# A configuration: the values of the filterable fields the runner set (a derived one, the
# limiter, is an outcome). A line's label names those that its style (precision, pipeline:
# see series_key) does not show.
_CONFIGURATION = tuple(f.wire for f in FILTERABLE if not f.derived)
_UNSTYLED = tuple(w for w in _CONFIGURATION if w not in ("precision", "pipeline"))


def matching_series(cases: Sequence[CaseView], vary: str) -> list[list[CaseView]]:
    """Groups of cases equal in every configuration field but ``vary``, with at least two
    distinct values of it, each sorted by ``vary``."""
    groups: dict[tuple[Any, ...], list[CaseView]] = defaultdict(list)
    for case in cases:
        groups[tuple(case.value(f) for f in _CONFIGURATION if f != vary)].append(case)
    return [sorted(g, key=lambda c: c.value(vary)) for g in groups.values()
            if len({c.value(vary) for c in g}) > 1]


def scaling_spec(cases: Sequence[CaseView], meta: Meta) -> Spec:
    """8. Throughput against F and against EP, each line one matching configuration.

    One trace per style and axis, its configurations' lines separated by gaps (``None``),
    not one trace per configuration: plotly's drawing time grows with the trace count."""
    data: list[Trace] = []
    shown: set[str] = set()
    numbers = point_numbers(cases)
    for axis, vary in (("", "F"), ("2", "ep")):
        lines: dict[tuple[str, str], list[list[CaseView]]] = defaultdict(list)
        for series in matching_series(cases, vary):
            lines[series_key(series[0])].append(series)
        for key, styled in lines.items():
            name = series_name(key)
            x: list[Any] = []
            y: list[Any] = []
            custom: list[list[Any]] = []
            points: list[CaseView | None] = []
            for series in styled:
                if x:
                    x.append(None)
                    y.append(None)
                    custom.append([None, None])
                    points.append(None)
                fixed = ", ".join(f"{f}={text(series[0].value(f))}" for f in _UNSTYLED if f != vary)
                x.extend(c.value(vary) for c in series)
                y.extend(c.usefulTFPerGPU for c in series)
                custom.extend([text(c.id), fixed] for c in series)
                points.extend(series)
            flat = [c for series in styled for c in series]
            data.append(numbered(scatter(
                flat, key, x, y, custom,
                hover("useful %{y:,.1f} TFLOP/s per GPU", f"{vary}=%{{x}}",
                      "series: %{customdata[1]}"),
                mode="lines+markers", line={"color": precision_colour(key[0]), "width": 1.5},
                connectgaps=False, showlegend=name not in shown, xaxis="x" + axis,
                yaxis="y" + axis,
            ), numbers_of(points, numbers)))
            shown.add(name)
    # A panel without a line keeps its axes and says why it is empty.
    annotations = []
    for axis, label, middle in (("", "F", 0.23), ("2", "EP", 0.77)):
        if not any(t.get("xaxis") == "x" + axis for t in data):
            data.append({"type": "scatter", "x": [], "y": [], "showlegend": False,
                         "hoverinfo": "skip", "xaxis": "x" + axis, "yaxis": "y" + axis})
            annotations.append(muted({
                **panel_title(f"no cases in view differ only in {label}", middle, 0.5),
                "yanchor": "middle"}))
    layout = chart_layout(
        "Scaling of useful throughput (each line: one matching configuration)",
        "useful TFLOP/s per GPU", annotations=annotations,
        xaxis={"title": titled("expert width F"), "type": "log", "domain": [0.0, 0.46],
               "anchor": "y", "tickvals": sorted({c.F for c in cases})},
        xaxis2={"title": titled("EP (ranks)"), "type": "log", "domain": [0.54, 1.0],
                "anchor": "y2", "tickvals": sorted({c.ep for c in cases})},
        yaxis2={"title": titled("useful TFLOP/s per GPU"), "anchor": "x2"},
    )
    return figure(data, layout)
