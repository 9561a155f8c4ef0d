"""/reports/<id>/cases/<caseId> — one case: its verdict against history, its caveats, its
charts, every field in its unit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

import dash
from dash import dcc, html

from app import figures
from app.case_view import CaseView
from app.core.db import session_scope
from app.core.errors import NotFound
from app.dashboard import links
from app.dashboard.alert_links import alert_links
from app.dashboard.components import GRAPH_CONFIG, not_found, parse_report_id
from app.services.case_page import case_page
from app.services.explain import CaseAgainstHistory

# Before the report page: its template would also match this longer path.
dash.register_page(__name__, path_template="/reports/<report_id>/cases/<case_id>",
                   title="moescope: case", name="Case", order=1)  # type: ignore[no-untyped-call]


def caveat_list(case: CaseView) -> html.Div | html.Ul:
    if not case.caveats:
        return html.Div("No caveat.", className="muted", id="case-caveats")
    return html.Ul([html.Li([html.Span(c.code, className=f"badge badge-{c.code}"),
                             " ", c.message]) for c in case.caveats],
                   id="case-caveats")


def layout(report_id: str | None = None, case_id: str | None = None, **_: Any) -> html.Div:
    rid = parse_report_id(report_id)
    cid = unquote(case_id or "")
    with session_scope() as session:
        try:
            if rid is None:
                raise NotFound(f"report {report_id} does not exist")
            page = case_page(session, rid, cid)
        except NotFound as exc:
            return not_found(exc.detail)
    case = page.case
    graphs = [html.Div(dcc.Graph(id=f"case-graph-{key}", figure=fig, config=GRAPH_CONFIG),
                       className="case-chart")
              for key, fig in page.charts.items()]
    return html.Div([
        html.Div(dcc.Link(f"← report {rid}", href=links.report_href(rid)), className="links"),
        html.H1(case.id, id="case-id"),
        html.H2("Against history"),
        verdict_block(page.history),
        alert_links(page.alerts, "case-alerts"),
        html.P(page.bound, id="case-bound"),
        html.P(f"The busiest rank's share of each roof at its intensity: {page.roofs}",
               id="case-roofs"),
        html.H2("Caveats"),
        caveat_list(case),
        html.Div(graphs, className="case-charts"),
        *([] if case.phaseMS else [html.P(
            "No phase chart: the runner timed no phases for this case (no phaseMS).",
            id="case-no-phases", className="muted")]),
        html.H2("Every field"),
        fields_table(page.fields),
    ])


def verdict_block(history: CaseAgainstHistory | None) -> html.Div:
    """The case's verdict against its series (the report page's and the regressions
    endpoint's), its change and noise, why it moved, and its history page."""
    if history is None:
        return html.Div("Not judged.", className="muted", id="case-verdict")
    v = history.verdict
    point = {"status": v.status, "changePercent": v.change_percent, "baseline": v.baseline,
             "baselinePoints": v.baseline_points, "noisePercent": v.noise_percent}
    why = history.attribution.text() if history.attribution else ""
    return html.Div([
        html.Span(figures.verdict_text(point), className=f"trend trend-{v.status}",
                  id="case-verdict-text"),
        *([html.Div(f"why: {why}", id="case-verdict-why")] if why else []),
        html.Div(dcc.Link("its history", href=history.history_href, id="case-history-link"),
                 className="links"),
    ], id="case-verdict")


def fields_table(fields: Sequence[tuple[str, str, str]]) -> html.Table:
    """Each value in its unit; the exact value as posted in the cell's tooltip."""
    return html.Table([
        html.Thead(html.Tr([html.Th("field"), html.Th("value")])),
        html.Tbody([html.Tr([html.Td(key), html.Td(text, title=exact)])
                    for key, text, exact in fields]),
    ], className="grid-table", id="case-fields")
