"""The roofline: each case's arithmetic intensity (useful FLOPs per analytical HBM byte)
against its attained useful TFLOP/s, under the report's own roofs: the HBM roof (intensity x
HBM peak) and each precision's compute roof, which meet at that precision's ridge point."""

from __future__ import annotations

from collections.abc import Sequence

from app.case_fields import CaseDict
from app.figures.layout import chart_layout, figure, missing, titled
from app.figures.style import Meta, Spec, Trace, fmt, grouped, precision_colour, text
from app.figures.traces import hover, hover_data, scatter

HBM_ROOF_COLOUR = "#444444"


def intensity(case: CaseDict) -> float | None:
    """Useful FLOP per analytical HBM byte: both figures are per layer time, so their ratio
    is FLOPs over bytes (TFLOP/s over GB/s, x 1000)."""
    useful, hbm = case.get("usefulTFPerGPU"), case.get("analyticalHBMGBps")
    if not useful or not hbm:
        return None
    return float(useful) * 1000.0 / float(hbm)


def ridge(peak_tf: float, hbm_gbps: float) -> float:
    """The intensity where the HBM roof reaches the compute roof (FLOP per byte)."""
    return peak_tf * 1000.0 / hbm_gbps


def roofline_spec(cases: Sequence[CaseDict], meta: Meta) -> Spec:
    """11. Arithmetic intensity against attained TFLOP/s, with the roofs and ridge points."""
    placed = [c for c in cases if intensity(c) is not None]
    data: list[Trace] = []
    hbm = meta.get("theoreticalHBMGBps")
    peaks = {p: float(v) for p, v in (meta.get("theoreticalTFPerGPU") or {}).items()
             if p in {str(c["precision"]) for c in placed} and v}
    xs = [intensity(c) or 0.0 for c in placed]
    if hbm and placed:
        ridges = {p: ridge(v, hbm) for p, v in peaks.items()}
        low = min(xs) / 2
        high = max([*xs, *ridges.values()]) * 2
        top = max(ridges.values(), default=high)
        data.append({
            "type": "scatter", "mode": "lines", "x": [low, top], "y": [low * hbm / 1000,
                                                                        top * hbm / 1000],
            "name": f"HBM roof {fmt(float(hbm), 0)} GB/s", "showlegend": False,
            "line": {"color": HBM_ROOF_COLOUR, "dash": "dash", "width": 1.5},
            "hovertemplate": f"HBM roof: %{{x:,.0f}} FLOP/B x {fmt(float(hbm), 0)} GB/s"
                             "<extra></extra>"})
        for precision, peak in peaks.items():
            colour = precision_colour(precision)
            data.append({
                "type": "scatter", "mode": "lines+markers+text",
                "x": [ridges[precision], high], "y": [peak, peak],
                "name": f"{text(precision)} compute roof", "showlegend": False,
                "line": {"color": colour, "dash": "dash", "width": 1.5},
                "marker": {"size": [9, 0], "color": colour, "symbol": "circle-open"},
                "text": [f"{text(precision)} ridge {ridges[precision]:,.0f} FLOP/B", ""],
                "textposition": "top left", "textfont": {"color": colour, "size": 11},
                "hovertemplate": f"{text(precision)} compute roof {peak:,.0f} TFLOP/s; "
                                 f"ridge at {ridges[precision]:,.0f} FLOP/B<extra></extra>"})
    for key, group in grouped(placed).items():
        data.append(scatter(
            group, key, [intensity(c) for c in group], [c["usefulTFPerGPU"] for c in group],
            hover_data(group, lambda c: c.get("limiter") or "n/a"),
            hover("%{x:,.1f} useful FLOP per HBM byte", "useful %{y:,.1f} TFLOP/s per GPU",
                  "limiter: %{customdata[1]}")))
    return figure(data, chart_layout(
        "Roofline: arithmetic intensity against attained throughput (dashed: the roofs)",
        "useful TFLOP/s per GPU (log)",
        xaxis={"title": titled("arithmetic intensity: useful FLOP per analytical HBM byte "
                               "(log)"), "type": "log"},
        yaxis={"title": titled("useful TFLOP/s per GPU (log)"), "type": "log"}),
        empty=missing(cases, "a useful throughput and an analytical HBM bandwidth"))
