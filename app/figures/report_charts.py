"""The single-panel charts of a report: throughput, % of peak, layer time, NVLink, HBM and
arithmetic intensity, each a pure function of the cases in view and the report's meta."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from app.case_view import CaseView
from app.figures.configuration import placement
from app.figures.layout import case_frame, chart_layout, figure, hline, missing, titled
from app.figures.point_key import numbered, numbers_of, point_numbers
from app.figures.style import (
    Meta,
    Spec,
    Trace,
    bar_marker,
    fmt,
    grouped,
    marker,
    series_name,
    text,
)
from app.figures.traces import hover, hover_data, hover_id, per_case, positions, scatter


def throughput_spec(cases: Sequence[CaseView], meta: Meta) -> Spec:
    """1. Useful TFLOP/s per GPU per case."""
    data = per_case(
        cases, lambda c: c.usefulTFPerGPU,
        hover("useful %{y:,.1f} TFLOP/s per GPU", "layer %{customdata[1]:.3f} ms"),
        lambda c: c.layerMS,
    )
    return figure(data, chart_layout("Useful throughput per GPU", "useful TFLOP/s per GPU",
                                     **case_frame(cases)),
                  empty=missing(cases, "a useful throughput"))


def percent_of_peak_spec(cases: Sequence[CaseView], meta: Meta) -> Spec:
    """2. % of the case's precision peak, with the 100 % line."""
    peaks = meta.get("theoreticalTFPerGPU") or {}
    data = per_case(
        cases, lambda c: c.percentOfPeak,
        hover("%{y:.1f} % of the precision's peak (%{customdata[2]:,} TFLOP/s)",
              "useful %{customdata[1]:,.1f} TFLOP/s per GPU"),
        lambda c: c.usefulTFPerGPU, lambda c: peaks.get(c.precision),
    )
    shapes, notes = hline(100.0, "100 % of peak")
    return figure(data, chart_layout(
        "Useful throughput as % of the precision's theoretical peak", "% of theoretical peak",
        **case_frame(cases, shapes=shapes, annotations=notes)),
        empty=missing(cases, "a theoretical peak for its precision"))


def _window_range(case: CaseView) -> tuple[float, float]:
    combined = (case.windows or {}).get("combined") or [case.layerMS]
    return case.layerMS - min(combined), max(combined) - case.layerMS


def layer_time_spec(cases: Sequence[CaseView], meta: Meta) -> Spec:
    """3. Layer time: forward and backward stacked, windows' min-max as error bars."""
    place = placement(cases)
    pos, width = place.x, place.width * 0.92
    data: list[Trace] = []
    for key, group in grouped(cases).items():
        x = [pos[c.id] for c in group]
        name = series_name(key)
        ids = hover_data(group)
        data.append({
            "type": "bar", "x": x, "y": [c.forwardMS for c in group], "width": width,
            "name": name + " forward", "legendgroup": name, "marker": bar_marker(key),
            "customdata": ids, "hovertemplate": hover("forward %{y:.3f} ms"),
        })
        if any(c.backwardMS is not None for c in group):
            data.append({
                "type": "bar", "x": x, "y": [c.backwardMS for c in group],
                "width": width, "name": name + " backward", "legendgroup": name, "opacity": 0.5,
                "marker": bar_marker(key), "customdata": ids,
                "hovertemplate": hover("backward %{y:.3f} ms"),
            })
        ranges = [_window_range(c) for c in group]
        data.append({
            "type": "scatter", "mode": "markers", "x": x, "y": [c.layerMS for c in group],
            "name": name + " windows min-max", "legendgroup": name, "showlegend": False,
            "marker": {"color": "#222222", "size": 3},
            "error_y": {"type": "data", "symmetric": False, "array": [r[1] for r in ranges],
                        "arrayminus": [r[0] for r in ranges], "color": "#222222",
                        "thickness": 1.2, "width": 3},
            "customdata": hover_data(group, lambda c: c.windowSpreadPercent),
            "hovertemplate": hover("layer %{y:.3f} ms (median of windows)",
                                   "windows spread %{customdata[1]:.2f} %"),
        })
    return figure(data, chart_layout("Layer time: forward + backward (bars: windows min-max)",
                                     "time per layer (ms)", **case_frame(cases),
                                     barmode="stack"), empty=missing(cases, "a layer time"))


def nvlink_spec(cases: Sequence[CaseView], meta: Meta) -> Spec:
    """4. NVLink TX and RX: mean over ranks (marker) and max over ranks (error bar top)."""
    pos = positions(cases)
    data: list[Trace] = []
    for key, group in grouped(cases).items():
        x = [pos[c.id] for c in group]
        for direction, open_ in (("TX", False), ("RX", True)):
            mean = [c.number(f"nvlink{direction}GBps") for c in group]
            top = [c.number(f"nvlinkMax{direction}GBps") for c in group]
            up = [t - m if t is not None and m is not None else None
                  for t, m in zip(top, mean, strict=True)]
            custom = [[hover_id(c), c.number(f"nvlinkMax{direction}GBps"),
                       c.number(f"nvlink{direction}PercentOfPeak")] for c in group]
            data.append(scatter(
                group, key, x, mean, custom,
                hover(f"{direction} mean %{{y:,.1f}} GB/s, max %{{customdata[1]:,.1f}} "
                      "GB/s over ranks",
                      "%{customdata[2]:.1f} % of the per-direction peak"),
                name=f"{series_name(key)} {direction}", marker=marker(key, open_=open_),
                error_y={"type": "data", "symmetric": False, "array": up,
                         "arrayminus": [0.0] * len(group), "thickness": 1},
            ))
    peak = meta.get("theoreticalNVLinkGBpsPerDirection")
    shapes, notes = hline(peak, f"per-direction peak {fmt(peak)} GB/s")
    return figure(data, chart_layout(
        "NVLink TX (filled) and RX (open): mean over ranks, bar up to the max rank",
        "NVLink GB/s per direction", **case_frame(cases, shapes=shapes, annotations=notes)),
        empty=missing(cases, "NVLink counters"))


def hbm_spec(cases: Sequence[CaseView], meta: Meta) -> Spec:
    """5. Analytical HBM bandwidth against the HBM peak."""
    data = per_case(
        cases, lambda c: c.analyticalHBMGBps,
        hover("analytical HBM %{y:,.1f} GB/s", "%{customdata[1]:.1f} % of the HBM peak"),
        lambda c: c.hbmPercentOfPeak,
    )
    peak = meta.get("theoreticalHBMGBps")
    shapes, notes = hline(peak, f"HBM peak {fmt(peak)} GB/s")
    return figure(data, chart_layout("Analytical HBM bandwidth (useful bytes / layer time)",
                                     "HBM GB/s",
                                     **case_frame(cases, shapes=shapes, annotations=notes)),
                  empty=missing(cases, "an analytical HBM bandwidth"))


def arithmetic_intensity_spec(cases: Sequence[CaseView], meta: Meta) -> Spec:
    """9. Forward FLOPs per logical payload byte (rank 0) against useful throughput."""
    measured = [c for c in cases if c.forwardFlopsPerLogicalPayloadByteRank0]
    numbers = point_numbers(cases)
    data = [numbered(scatter(group, key,
                             [c.forwardFlopsPerLogicalPayloadByteRank0 for c in group],
                             [c.usefulTFPerGPU for c in group], hover_data(group),
                             hover("%{x:,.0f} forward FLOP per logical payload byte",
                                   "useful %{y:,.1f} TFLOP/s per GPU")),
                     numbers_of(group, numbers))
            for key, group in grouped(measured).items()]
    return figure(data, chart_layout(
        "Arithmetic intensity against throughput", "useful TFLOP/s per GPU",
        xaxis={"title": titled("forward FLOP per logical payload byte (rank 0)"),
               "type": "log"}),
        empty=missing(cases, "forward FLOP per logical payload byte"))


PHASES = (("dispatch", "#4c78a8"), ("experts", "#f58518"), ("combine", "#54a24b"))
# Timed apart where the dispatch is quantized: stacked first, only when a case has it.
QUANTIZE = ("quantize", "#b279a2")


def phases_spec(cases: Sequence[CaseView], meta: Meta) -> Spec:
    """10. Per-phase times (phaseMS: dispatch, experts, combine), stacked per case: in
    milliseconds above, as % of the case's forward time below (a combine that doubles on a
    0.7 ms case shows beside 27 ms training cases); a case without them draws no bar. Its
    own legend: the phases' colours are not the precisions'."""
    place = placement(cases)
    x = [place.x[c.id] for c in cases]
    data: list[Trace] = []
    quantized = any("quantize" in (c.phaseMS or {}) for c in cases)
    for phase, colour in ((QUANTIZE,) if quantized else ()) + PHASES:
        values = [(c.phaseMS or {}).get(phase) for c in cases]
        custom = hover_data(cases, _configuration, partial(_phase_rate, phase=phase))
        data.append({
            "type": "bar", "x": x, "y": values, "width": place.width * 0.92, "name": phase,
            "marker": {"color": colour}, "customdata": custom,
            "hovertemplate": hover(f"{phase} %{{y:.4f}} ms", "%{customdata[1]}",
                                   "%{customdata[2]}"),
        })
        data.append({
            "type": "bar", "x": x, "y": [_share(v, c) for v, c in zip(values, cases,
                                                                      strict=True)],
            "width": place.width * 0.92, "name": f"{phase}, % of forward",
            "showlegend": False, "marker": {"color": colour}, "customdata": custom,
            "xaxis": "x", "yaxis": "y2",
            "hovertemplate": hover(f"{phase} %{{y:.1f}} % of the forward", "%{customdata[1]}",
                                   "%{customdata[2]}"),
        })
    frame = case_frame(cases)
    frame["xaxis"] = {**frame["xaxis"], "anchor": "y2"}
    return figure(data, chart_layout(
        "Phases: dispatch, experts, combine (each timed alone), in ms and in % of the forward",
        "time per phase (ms)", **frame, barmode="stack", height=620,
        legend={"title": titled("phase"), "orientation": "h", "y": 1.08},
        yaxis={"title": titled("time per phase (ms)"), "domain": [0.55, 1.0]},
        yaxis2={"title": titled("% of the forward time"), "domain": [0.0, 0.45],
                "anchor": "x"}),
        empty=missing(cases, "per-phase times (phaseMS)"))


def _share(value: float | None, case: CaseView) -> float | None:
    forward = case.forwardMS
    return None if value is None or not forward else value / float(forward) * 100.0


def _configuration(case: CaseView) -> str:
    return text(f"{case.precision} · {case.pipeline}")


def _phase_rate(case: CaseView, phase: str) -> str:
    rate = case.number(f"{phase}GBps")
    return (f"{rate:,.1f} GB/s (busiest rank's remote bytes)" if isinstance(rate, int | float)
            else "")
