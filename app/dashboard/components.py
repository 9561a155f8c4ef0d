"""Small layout helpers shared by the pages. Report strings go in as text children only:
Dash renders children as text, never as HTML."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dash import dcc, html

from app import figures
from app.case_view import CaseView
from ingest.derived import CAVEAT_MEANINGS, ReportNote

GRAPH_CONFIG: Any = {"displaylogo": False, "responsive": True}


def parse_report_id(raw: Any) -> int | None:
    try:
        return int(str(raw))
    except ValueError:
        return None


def not_found(message: str) -> html.Div:
    return html.Div([html.H1("Not found"), html.P(message),
                     dcc.Link("All reports", href="/")], className="empty")


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} %"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], **kwargs: Any) -> html.Table:
    return html.Table([
        html.Thead(html.Tr([html.Th(h) for h in header])),
        html.Tbody([html.Tr([html.Td(cell) for cell in row]) for row in rows]),
    ], className="grid-table", **kwargs)


def note_block(note: ReportNote) -> html.Div:
    qualifies = f" (qualifies {note.qualifies})" if note.qualifies else " (not a known note)"
    return html.Div([
        html.Div([html.Code(note.key), html.Span(qualifies, className="muted")],
                 className="note-key"),
        html.P(note.text, className="note-text"),
    ], className="note")


def caveat_badges(counts: dict[str, int]) -> html.Div:
    """A badge per caveat code with its count; hover gives its meaning, a click goes to the
    cases that carry it (the report page's ``report-caveat-<code>`` list)."""
    if not counts:
        return html.Div("no case in view carries a caveat", className="muted")
    return html.Div([html.A(f"{code}: {n}", href=f"#report-caveat-{code}",
                            title=CAVEAT_MEANINGS.get(code, code),
                            className=f"badge badge-{code}")
                     for code, n in counts.items()], className="badges")


# The plotly marker symbols as text, for the shared legend; an unknown one shows its name.
_GLYPHS = {"circle": "\u25cf", "square": "\u25a0", "diamond": "\u25c6",
           "triangle-up": "\u25b2", "triangle-down": "\u25bc", "cross": "\u271a",
           "x": "\u2716", "star": "\u2605", "hexagon": "\u2b22", "pentagon": "\u2b1f"}


def style_legend(cases: Sequence[CaseView]) -> list[Any]:
    """One legend for all the charts: colour and marker shape per precision, a mark inside
    the marker (and bar hatching) per pipeline, from the mapping functions the figures
    use."""
    precisions = sorted({c.precision for c in cases})
    pipelines = sorted({c.pipeline for c in cases})
    colours = []
    for p in precisions:
        shape = figures.precision_symbol(p)
        # A shape without plotly's + and × marks shows its pipelines otherwise: named here.
        other = [f"{q}: {figures.marker_symbol((p, q))}" for q in pipelines
                 if figures.marker_symbol((p, q)) != shape + figures.pipeline_symbol(q)]
        colours.append(html.Span([
            html.Span(_GLYPHS.get(shape, "\u25a0"), className="swatch",
                      style={"color": figures.precision_colour(p)}), p,
            *([html.Span(f" ({', '.join(other)})", className="muted")] if other else [])],
            className="legend-item"))
    markers = []
    for p in pipelines:
        mark = figures.pipeline_symbol(p)
        hatch = figures.pipeline_pattern(p)
        markers.append(html.Span([
            html.Span(_MARKS.get(mark, mark), className="swatch"), p,
            html.Span(f" (bars {'hatched ' + hatch if hatch else 'plain'})",
                      className="muted")], className="legend-item"))
    return [html.Span("precision", className="legend-label"), *colours,
            html.Span("pipeline", className="legend-label"), *markers,
            html.Span("dark outline: the case carries a caveat; open markers: RX / reserved; "
                      "light bars: backward / scratch", className="muted")]


# The pipeline's mark inside a precision's marker, as text.
_MARKS = {"": "plain", "-cross": "+ inside", "-x": "\u00d7 inside", "-dot": "\u2022 inside"}


def line_breaks(lines: Sequence[str]) -> list[Any]:
    """Lines of one table cell, a <br> between each."""
    out: list[Any] = []
    for i, line in enumerate(lines):
        out.extend([html.Br()] if i else [])
        out.append(line)
    return out
