"""The roofline: each case at its busiest rank (the rank the layer waits for), its arithmetic
intensity (useful FLOPs per HBM byte; forward FLOPs per NVLink payload byte) against its
attained useful TFLOP/s, under the report's own roofs: the HBM and NVLink roofs (intensity x
bandwidth) and each precision's compute roof, which meet at that precision's ridge points."""

from __future__ import annotations

from collections.abc import Sequence

from app.case_view import CaseView
from app.figures.layout import chart_layout, figure, missing, titled
from app.figures.point_key import numbered, numbers_of, point_numbers
from app.figures.style import Meta, Spec, Trace, fmt, grouped, precision_colour, text
from app.figures.traces import hover, hover_data, scatter
from ingest.bounds import ROOF_NAMES

HBM_ROOF_COLOUR = "#444444"


def intensity(case: CaseView) -> float | None:
    """Useful FLOP per analytical HBM byte: both figures are per layer time, so their ratio
    is FLOPs over bytes (TFLOP/s over GB/s, x 1000)."""
    useful, hbm = case.usefulTFPerGPU, case.analyticalHBMGBps
    if not useful or not hbm:
        return None
    return float(useful) * 1000.0 / float(hbm)


def ridge(peak_tf: float, hbm_gbps: float) -> float:
    """The intensity where the HBM roof reaches the compute roof (FLOP per byte)."""
    return peak_tf * 1000.0 / hbm_gbps


def busiest_rate(case: CaseView) -> float | None:
    """The busiest rank's useful TFLOP/s (the mean rank's x hotRankFactor): the layer waits
    for that rank, so the roofline plots it (DESIGN.md "Derived metrics")."""
    useful = case.usefulTFPerGPU
    if not useful:
        return None
    return float(useful) * float(case.hotRankFactor or 1.0)


def hbm_intensity(case: CaseView, hbm_peak: float | None) -> float | None:
    """The busiest rank's useful FLOP per HBM byte of its own model bytes (its rate over
    hbmUtilPercent of the HBM peak); the mean rank's where that is unknown."""
    rate, util = busiest_rate(case), case.hbmUtilPercent
    if rate is None:
        return None
    if util and hbm_peak:
        return rate * 1000.0 / (float(util) / 100.0 * hbm_peak)
    return intensity(case)


def nvlink_intensity(case: CaseView) -> float | None:
    """Forward FLOP per logical payload byte of rank 0, the rank the routing plan loads most."""
    value = case.forwardFlopsPerLogicalPayloadByteRank0
    return float(value) if value else None


def roof_distances(case: CaseView, meta: Meta) -> dict[str, float | None]:
    """How close the busiest rank comes to each roof at its intensities, % of the roof:
    compute (its peak), HBM (intensity x HBM GB/s), NVLink (payload intensity x NVLink GB/s)."""
    rate = busiest_rate(case)
    peak = (meta.get("theoreticalTFPerGPU") or {}).get(case.precision)
    hbm, nvlink = meta.get("theoreticalHBMGBps"), meta.get("theoreticalNVLinkGBpsPerDirection")
    x_hbm, x_nv = hbm_intensity(case, hbm), nvlink_intensity(case)

    def share(roof: float | None) -> float | None:
        return None if rate is None or not roof else rate / roof * 100.0

    return {"compute": None if case.emulated else share(peak),
            "hbm": share(x_hbm * hbm / 1000.0 if x_hbm and hbm else None),
            "nvlink": share(x_nv * nvlink / 1000.0 if x_nv and nvlink else None)}


def distances_text(distances: dict[str, float | None]) -> str:
    return ", ".join(f"{ROOF_NAMES[k]} {v:.0f} %" for k, v in distances.items()
                     if v is not None) or "no roof known"


def _roofs(peaks: dict[str, float], bandwidth: float, xs: list[float], axis: str,
           name: str) -> list[Trace]:
    """A bandwidth roof (intensity x GB/s) up to the highest ridge, and each precision's
    compute roof from its ridge on, on one x axis (``x`` or ``x2``)."""
    ridges = {p: ridge(v, bandwidth) for p, v in peaks.items()}
    low, high = min(xs) / 2, max([*xs, *ridges.values()]) * 2
    top = max(ridges.values(), default=high)
    where = {"xaxis": axis, "yaxis": axis.replace("x", "y")}
    traces: list[Trace] = [{
        "type": "scatter", "mode": "lines", "x": [low, top],
        "y": [low * bandwidth / 1000, top * bandwidth / 1000],
        "name": f"{name} roof {fmt(bandwidth, 0)} GB/s", "showlegend": False,
        "line": {"color": HBM_ROOF_COLOUR, "dash": "dash", "width": 1.5},
        "hovertemplate": f"{name} roof: %{{x:,.0f}} FLOP/B x {fmt(bandwidth, 0)} GB/s"
                         "<extra></extra>", **where}]
    for precision, peak in peaks.items():
        colour = precision_colour(precision)
        traces.append({
            "type": "scatter", "mode": "lines+markers+text", "x": [ridges[precision], high],
            "y": [peak, peak], "name": f"{text(precision)} compute roof"
            + ("" if axis == "x" else f" ({name})"), "showlegend": False,
            "line": {"color": colour, "dash": "dash", "width": 1.5},
            "marker": {"size": [9, 0], "color": colour, "symbol": "circle-open"},
            "text": [f"{text(precision)} ridge {ridges[precision]:,.0f} FLOP/B", ""],
            "textposition": "top right", "textfont": {"color": colour, "size": 11},
            "hovertemplate": f"{text(precision)} compute roof {peak:,.0f} TFLOP/s; "
                             f"ridge at {ridges[precision]:,.0f} FLOP/B<extra></extra>",
            **where})
    return traces


def roofline_spec(cases: Sequence[CaseView], meta: Meta) -> Spec:
    """11. Each case at its busiest rank: useful FLOP per HBM byte (left) and per NVLink
    payload byte (right) against attained TFLOP/s, under the HBM and NVLink roofs and each
    precision's compute roof, ridge points marked."""
    hbm = float(meta.get("theoreticalHBMGBps") or 0) or None
    nvlink = float(meta.get("theoreticalNVLinkGBpsPerDirection") or 0) or None
    placed = [c for c in cases if hbm_intensity(c, hbm) is not None]
    linked = [c for c in placed if nvlink_intensity(c) is not None]
    peaks = {p: float(v) for p, v in (meta.get("theoreticalTFPerGPU") or {}).items()
             if p in {c.precision for c in placed} and v}
    data: list[Trace] = []
    if hbm and placed:
        data += _roofs(peaks, hbm, [hbm_intensity(c, hbm) or 0.0 for c in placed], "x", "HBM")
    if nvlink and linked:
        data += _roofs(peaks, nvlink, [nvlink_intensity(c) or 0.0 for c in linked], "x2",
                       "NVLink")
    numbers = point_numbers(cases)
    lines = ("useful %{y:,.1f} TFLOP/s, busiest rank", "limiter: %{customdata[1]}",
             "of each roof: %{customdata[2]}")
    for key, group in grouped(placed).items():
        custom = hover_data(group, lambda c: c.limiter or "n/a",
                            lambda c: distances_text(roof_distances(c, meta)))
        data.append(numbered(scatter(
            group, key, [hbm_intensity(c, hbm) for c in group],
            [busiest_rate(c) for c in group], custom,
            hover("%{x:,.1f} useful FLOP per HBM byte", *lines)), numbers_of(group, numbers)))
    for key, group in grouped(linked).items():
        custom = hover_data(group, lambda c: c.limiter or "n/a",
                            lambda c: distances_text(roof_distances(c, meta)))
        data.append(numbered(scatter(
            group, key, [nvlink_intensity(c) for c in group],
            [busiest_rate(c) for c in group], custom,
            hover("%{x:,.1f} forward FLOP per NVLink payload byte", *lines),
            xaxis="x2", yaxis="y2", showlegend=False), numbers_of(group, numbers)))
    log = "useful TFLOP/s per GPU, busiest rank (log)"
    return figure(data, chart_layout(
        "Roofline at the busiest rank: HBM (left) and NVLink (right) roofs dashed",
        log,
        xaxis={"title": titled("useful FLOP per analytical HBM byte (log)"), "type": "log",
               "domain": [0, 0.47]},
        yaxis={"title": titled(log), "type": "log"},
        xaxis2={"title": titled("forward FLOP per NVLink payload byte, rank 0 (log)"),
                "type": "log", "domain": [0.53, 1], "anchor": "y2"},
        yaxis2={"type": "log", "anchor": "x2", "matches": "y"}),
        empty=missing(cases, "a useful throughput and an analytical HBM bandwidth"))
