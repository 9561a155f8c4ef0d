"""The report page's charts: each beside its aside (the cases it draws, the report notes
that qualify it, the caveats in view), and a line for each chart left out, saying why. A
filter changes each part apart: the page sends only those that changed (``shown``)."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from app.dashboard.components import GRAPH_CONFIG, note_block
from app.services import chart_panels


def drawn_text(panel: chart_panels.ChartPanel) -> list[Any]:
    """How many cases the chart draws, and for a chart with numbered points its key."""
    drawn = panel.drawn
    if not panel.point_key:
        return [drawn]
    return [drawn, html.Details([
        html.Summary("key to the numbered points"),
        html.Ol([html.Li(case_id, value=str(n)) for n, case_id in panel.point_key],
                className="point-key")], className="point-key-details")]


def chart_notes(panel: chart_panels.ChartPanel) -> list[Any]:
    return ([note_block(n) for n in panel.notes]
            or [html.Div("no report note qualifies this chart", className="muted")])


def chart_aside(key: str, parts: dict[str, Any]) -> list[Any]:
    """The chart's cases drawn, its notes and its caveats: three parts that a filter
    changes apart (the notes seldom), each sent only when it changes (``shown``)."""
    return [
        html.Div(parts[f"report-aside-{key}-drawn.children"], id=f"report-aside-{key}-drawn",
                 className="muted"),
        html.H4("Qualifying notes"),
        html.Div(parts[f"report-aside-{key}-notes.children"], id=f"report-aside-{key}-notes"),
        html.H4("Caveats in view"),
        html.Div(parts[f"report-aside-{key}-caveats.children"],
                 id=f"report-aside-{key}-caveats"),
    ]


def chart_rows(panels: list[chart_panels.ChartPanel], parts: dict[str, Any]) -> list[Any]:
    """Every chart (a chart with nothing to show hidden, so a filter can bring it back),
    then one line per chart left out and why."""
    return [*(html.Section([
        html.Div(dcc.Graph(id=f"report-graph-{p.key}",
                           figure=parts[f"report-figure-{p.key}.data"], config=GRAPH_CONFIG),
                 className="chart"),
        html.Aside(chart_aside(p.key, parts), id=f"report-aside-{p.key}",
                   className="chart-aside"),
    ], className="chart-row", id=f"report-chart-{p.key}",
        hidden=parts[f"report-chart-{p.key}.hidden"])
        for p in panels),
        html.Div(parts["report-absent-charts.children"], id="report-absent-charts",
                 className="muted")]


def absent_lines(panels: list[chart_panels.ChartPanel]) -> list[html.P]:
    return [html.P(f"{p.title} not drawn: {p.absent}.") for p in panels if p.absent]
