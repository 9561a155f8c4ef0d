"""/compare?base=<id>&head=<id> — two reports matched by case id, each case judged as
history judges it; without ids, the newest report against the previous one of its series."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, clientside_callback, dcc, html

from app.core.db import session_scope
from app.core.errors import NotFound
from app.dashboard import links, report_cache
from app.dashboard.alert_links import alert_links
from app.dashboard.components import GRAPH_CONFIG, line_breaks, parse_report_id, table
from app.services import compare_text, comparison, report_list
from app.services.compare_page import compare_page
from app.services.compare_text import CaseCells

dash.register_page(__name__, path="/compare", title="moescope: compare", name="Compare",
                   order=3)  # type: ignore[no-untyped-call]


def case_row(head: int, cells: CaseCells) -> html.Tr:
    return html.Tr([
        html.Td(dcc.Link(cells.case_id, href=links.case_href(head, cells.case_id)),
                className="case-id"),
        html.Td(cells.verdict, className=cells.status),
        html.Td(cells.why),
        *[html.Td(line_breaks(lines), className="family") for lines in cells.families],
    ])


def comparison_view(base: int | None, head: int | None, why: str | None = None) -> html.Div:
    if base is None or head is None:
        return html.Div([html.P(why or "Choose a base and a head report."),
                         *([dcc.Link("Across hardware: the platforms page", href="/platforms")]
                           if why else [])], className="muted", id="compare-no-pair")
    with session_scope() as session:
        try:
            page = compare_page(report_cache(), session, base, head)
        except NotFound as exc:
            return html.Div(exc.detail, className="muted")
    provenance: Any = (
        table(compare_text.PROVENANCE_COLUMNS, page.provenance, id="compare-provenance")
        if page.provenance else html.P("No meta field differs.", className="muted",
                                       id="compare-provenance"))
    groups, result = page.groups, page.result
    return html.Div([
        *([html.P(result.headline, id="compare-headline", className="cap-banner")]
          if result.headline else []),
        html.H2("What differs in provenance"),
        provenance,
        html.H2("Verdict"),
        html.P(page.series_line, className="muted", id="compare-series"),
        html.P(page.summary, id="compare-summary"),
        alert_links(page.alerts, "compare-alerts"),
        html.Ul([html.Li(g) for g in groups], id="compare-groups") if groups else
        html.P("No case moved past its threshold and noise.", className="muted",
               id="compare-groups"),
        html.Div(html.A("Export HTML", href=links.compare_export_href(base, head),
                        id="compare-export-link"), className="links"),
        dcc.Graph(id="compare-ratio", figure=page.chart, config=GRAPH_CONFIG),
        html.H2("Geometric-mean change per mode, precision and pipeline"),
        table(compare_text.GEOMEAN_COLUMNS, page.geomeans, id="compare-geomeans"),
        html.H2("Matched cases (regressions first)"),
        html.Div(html.Table([
            html.Thead(html.Tr([html.Th(h) for h in compare_text.CASE_COLUMNS])),
            html.Tbody([case_row(head, cells) for cells in page.cases]),
        ], className="grid-table compare-table", id="compare-table"), className="table-scroll"),
        html.H3(f"Only in base #{base} ({len(result.only_base)})"),
        table(["case"], [[c] for c in result.only_base], id="compare-only-base"),
        html.H3(f"Only in head #{head} ({len(result.only_head)})"),
        table(["case"], [[c] for c in result.only_head], id="compare-only-head"),
    ])


def layout(base: str | None = None, head: str | None = None, **_: Any) -> html.Div:
    with session_scope() as session:
        options = report_list.report_options(session)
    b, h = parse_report_id(base) if base else None, parse_report_id(head) if head else None
    why = None
    if base is None and head is None:
        with session_scope() as session:
            b, h = comparison.default_pair(session) or (None, None)
            why = comparison.no_pair_text(session) if b is None else None
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
        html.Div(comparison_view(b, h, why), id="compare-result"),
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
