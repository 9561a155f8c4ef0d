"""/compare?base=<id>&head=<id> — two reports matched by case id."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, clientside_callback, dcc, html

from app.core.db import session_scope
from app.core.errors import NotFound
from app.dashboard import links, report_list
from app.dashboard.components import parse_report_id, table
from app.services import cases as case_service
from app.services import comparison

dash.register_page(__name__, path="/compare", title="moescope: compare", name="Compare",
                   order=3)  # type: ignore[no-untyped-call]


def change_cell(change: comparison.Change) -> html.Td:
    text = comparison.change_text(change)
    if change.percent is None:
        return html.Td(text)
    return html.Td(text, className=change.verdict or "unchanged")


def comparison_view(base: int | None, head: int | None) -> html.Div:
    if base is None or head is None:
        return html.Div("Choose a base and a head report.", className="muted")
    with session_scope() as session:
        try:
            result = comparison.compare(case_service.view_cases(session, base),
                                  case_service.view_cases(session, head))
        except NotFound as exc:
            return html.Div(exc.detail, className="muted")
    header = ["case", *[label for _, label, _ in comparison.COMPARED]]
    body = html.Tbody([
        html.Tr([html.Td(dcc.Link(row["id"], href=links.case_href(head, row["id"]))),
                 *[change_cell(row["changes"][name]) for name, _, _ in comparison.COMPARED]])
        for row in comparison.ranked(result.rows)
    ])
    return html.Div([
        html.P(comparison.summary_text(result), id="compare-summary"),
        html.Div(html.A("Export HTML", href=links.compare_export_href(base, head),
                        id="compare-export-link"), className="links"),
        html.Table([html.Thead(html.Tr([html.Th(h) for h in header])), body],
                   className="grid-table", id="compare-table"),
        html.H3(f"Only in base #{base} ({len(result.only_base)})"),
        table(["case"], [[c] for c in result.only_base], id="compare-only-base"),
        html.H3(f"Only in head #{head} ({len(result.only_head)})"),
        table(["case"], [[c] for c in result.only_head], id="compare-only-head"),
    ])


def layout(base: str | None = None, head: str | None = None, **_: Any) -> html.Div:
    with session_scope() as session:
        options = report_list.report_options(session)
    b, h = parse_report_id(base) if base else None, parse_report_id(head) if head else None
    # A requested report the pickers cannot hold would just vanish from them: say so.
    known = {o["value"] for o in options}
    missing = [f"{role} report {raw} does not exist" for role, raw, rid in
               (("base", base, b), ("head", head, h)) if raw and rid not in known]
    b, h = (b if b in known else None), (h if h in known else None)
    return html.Div([
        html.H1("Compare two reports"),
        *([html.Div("; ".join(missing), id="compare-missing", className="cap-banner")]
          if missing else []),
        html.Div([
            html.Label([html.Span("base"), dcc.Dropdown(id="compare-base", options=options,
                                                        value=b, clearable=False)],
                       className="filter"),
            html.Label([html.Span("head"), dcc.Dropdown(id="compare-head", options=options,
                                                        value=h, clearable=False)],
                       className="filter"),
        ], className="filters"),
        dcc.Store(id="compare-search"),
        dcc.Store(id="compare-search-applied"),
        html.Div(comparison_view(b, h), id="compare-result"),
    ])


@callback(Output("compare-result", "children"), Output("compare-search", "data"),
          Input("compare-base", "value"), Input("compare-head", "value"),
          prevent_initial_call=True)
def choose(base: int | None, head: int | None) -> tuple[html.Div, str]:
    search = "?" + "&".join(f"{k}={int(v)}" for k, v in (("base", base), ("head", head))
                            if v is not None)
    return comparison_view(base, head), search


clientside_callback(
    """function (search) {
        if (search && search !== window.location.search) {
            window.history.replaceState(null, '', window.location.pathname + search);
        }
        return search;
    }""",
    Output("compare-search-applied", "data"), Input("compare-search", "data"),
)
