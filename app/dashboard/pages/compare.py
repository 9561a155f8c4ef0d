"""/compare?base=<id>&head=<id> — two reports matched by case id."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, clientside_callback, dcc, html

from app.core.db import session_scope
from app.core.errors import NotFound
from app.dashboard import comparison, links, report_list
from app.dashboard.components import parse_report_id, table

dash.register_page(__name__, path="/compare", title="moescope: compare", name="Compare",
                   order=3)  # type: ignore[no-untyped-call]


def number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def change_cell(change: comparison.Change) -> html.Td:
    if change.base is None or change.head is None:
        return html.Td("n/a")
    values = f"{number(change.base)} → {number(change.head)}"
    if change.percent is None:
        return html.Td(values)
    return html.Td(f"{values} ({change.percent:+.1f} %)",
                   className=change.verdict or "unchanged")


def _verdicts(row: dict[str, Any]) -> set[str]:
    return {c.verdict for c in row["changes"].values()}


def _rank(row: dict[str, Any]) -> int:
    """Regressions first, then improvements, then the rest (report order within each)."""
    verdicts = _verdicts(row)
    return 0 if "regression" in verdicts else 1 if "improvement" in verdicts else 2


def comparison_view(base: int | None, head: int | None) -> html.Div:
    if base is None or head is None:
        return html.Div("Choose a base and a head report.", className="muted")
    with session_scope() as session:
        try:
            result = comparison.compare(comparison.report_cases(session, base),
                                  comparison.report_cases(session, head))
        except NotFound as exc:
            return html.Div(exc.detail, className="muted")
    # Cases, not changed fields: one slower case is also lower in throughput and % of peak,
    # and "3 regressions" for it read as three regressed cases.
    verdicts = [_verdicts(r) for r in result.rows]
    regressions = sum(1 for v in verdicts if "regression" in v)
    improvements = sum(1 for v in verdicts if "improvement" in v)
    header = ["case", *[label for _, label, _ in comparison.COMPARED]]
    body = html.Tbody([
        html.Tr([html.Td(dcc.Link(row["id"], href=links.case_href(head, row["id"]))),
                 *[change_cell(row["changes"][name]) for name, _, _ in comparison.COMPARED]])
        for row in sorted(result.rows, key=_rank)
    ])
    return html.Div([
        html.P(f"{len(result.rows)} matched case(s); {regressions} with a regression and "
               f"{improvements} with an improvement over "
               f"{comparison.CHANGE_THRESHOLD_PERCENT:g} %.",
               id="compare-summary"),
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
