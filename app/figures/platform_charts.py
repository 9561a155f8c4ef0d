"""The platforms page's charts (issue 25), shared by the page and its export.

A chart per (mode, category): each platform's best useful TF/GPU per configuration, as
horizontal bars so that the configuration names sit on the axis and each bar carries its
value and the precision · pipeline that reached it as text: legible printed, no hovering
needed. And one scatter: % of peak against useful TF/GPU, a trace per platform, so a
platform that is fast only because its peak is high reads apart from one that is efficient.

Input is plain data (``BestBars``, ``PeakPoints``) that ``app.services.platforms`` builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.figures.layout import chart_layout, figure, titled
from app.figures.style import PALETTE, Spec, Trace, text


@dataclass(frozen=True)
class BestBars:
    """One (mode, category): per configuration (label, in order) and per platform, the
    best useful TF/GPU over its precision x pipeline variants and which variant it was."""

    mode: str
    category: str
    labels: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]  # [platform][configuration]
    variants: tuple[tuple[str, ...], ...]  # [platform][configuration]: "bf16 · staged"


@dataclass(frozen=True)
class PeakPoints:
    """One platform's cases: % of peak (x) and useful TF/GPU (y)."""

    percent_of_peak: tuple[float, ...]
    useful_tf: tuple[float, ...]
    labels: tuple[str, ...]  # the configuration and variant, for the hover


def platform_colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


# Pixels per configuration row: room for one bar per platform and its text label.
_ROW_PX = 18


def best_bars_spec(chart: BestBars, platform_names: Sequence[str]) -> Spec:
    n = max(len(platform_names), 1)
    data: list[Trace] = []
    for i, name in enumerate(platform_names):
        values = chart.values[i]
        data.append({
            "type": "bar", "orientation": "h", "name": text(name),
            "y": list(chart.labels), "x": list(values),
            "marker": {"color": platform_colour(i)},
            "text": [f"{v:,.0f} ({text(var)})" if v is not None else "not run"
                     for v, var in zip(values, chart.variants[i], strict=True)],
            "textposition": "outside", "cliponaxis": False,
            "textfont": {"size": 11, "color": "#111111"},
            "hovertemplate": "%{y}: %{text}<extra>%{fullData.name}</extra>",
        })
    top = max((v for row in chart.values for v in row if v is not None), default=1.0)
    height = 120 + len(chart.labels) * n * _ROW_PX
    layout = chart_layout(
        f"{text(chart.mode)} · {text(chart.category)}: best useful TF/GPU per configuration",
        "", height=height, barmode="group", bargap=0.25,
        margin={"l": 130, "r": 30, "t": 50, "b": 50},
        legend={"title": titled("platform"), "orientation": "h", "y": -40 / height,
                "yanchor": "top", "x": 0},
        # Room right of the longest bar for its text label (1,234 (mxfp8 · staged)).
        xaxis={"title": titled("useful TFLOP/s per GPU (best variant)"),
               "range": [0, top * 1.45], "rangemode": "tozero"},
        yaxis={"autorange": "reversed", "type": "category", "automargin": False,
               "tickfont": {"size": 12}})
    return figure(data, layout, empty="no configuration in view")


def peak_scatter_spec(points: Sequence[PeakPoints], platform_names: Sequence[str]) -> Spec:
    data: list[Trace] = [{
        "type": "scatter", "mode": "markers", "name": text(name),
        "x": list(p.percent_of_peak), "y": list(p.useful_tf),
        "marker": {"color": platform_colour(i), "size": 8,
                   "symbol": ("circle", "square", "diamond", "triangle-up", "x",
                              "cross", "star")[i % 7]},
        "customdata": [text(label) for label in p.labels],
        "hovertemplate": ("%{customdata}<br>%{x:.1f} % of peak, %{y:,.0f} TF/GPU"
                          "<extra>%{fullData.name}</extra>"),
    } for i, (name, p) in enumerate(zip(platform_names, points, strict=True))]
    layout = chart_layout(
        "Useful TF/GPU against % of the report's own peak (each point a case)",
        "useful TFLOP/s per GPU", height=440,
        legend={"title": titled("platform")},
        xaxis={"title": titled("% of the platform's theoretical peak (its precision)"),
               "rangemode": "tozero"})
    return figure(data, layout, empty="no case with a % of peak")
