"""Small layout helpers shared by the pages. Report strings go in as text children only:
Dash renders children as text, never as HTML."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dash import dcc, html

from ingest.derived import ReportNote

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
    if not counts:
        return html.Div("no case in view carries a caveat", className="muted")
    return html.Div([html.Span(f"{code}: {n}", className=f"badge badge-{code}")
                     for code, n in counts.items()], className="badges")
