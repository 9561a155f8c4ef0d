"""The report page's "Against history" section (services.against_history builds it, the
export shows the same): the moved cases in view, grouped by the dimensions they share,
then one by one; and the case table's column linking each case to its history page."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from app.services.against_history import AgainstHistory

# Filled from the page's store of marks (see report.py's rowData callback): every row gets
# its case's historyChange, historyStatus and historyHref.
TREND_COLUMN: dict[str, Any] = {
    "field": "historyChange", "headerName": "vs history %", "cellRenderer": "HistoryTrend",
    "filter": "agNumberColumnFilter", "width": 132, "minWidth": 120,
}
HEADINGS = ("verdict", "case (its history)", "layer time change", "baseline", "noise",
            "why: phases, GPU state")


def moved_list(history: AgainstHistory) -> list[Any]:
    """The moved cases in view: what the list shows, and what the filter callback redraws
    (from the page's store of marks: no history query)."""
    if not history.flagged:
        return [html.P("No moved case is in view." if history.everywhere else "",
                       className="muted", id="report-moved-groups")]
    rows = [html.Tr([
        html.Td(m.status, className=f"trend trend-{m.status}"),
        html.Td(dcc.Link(case_id, href=m.href)),
        html.Td(f"{m.change or 0.0:+.1f} %"),
        html.Td(f"{m.baseline or 0.0:.4g} ms, median of {m.baseline_points}"),
        html.Td(f"{m.noise or 0.0:.1f} %"),
        html.Td(m.why or "no phases or GPU state to compare"),
    ]) for case_id, m in history.flagged]
    return [
        *([html.P(history.in_view, className="muted", id="report-moved-in-view")]
          if history.in_view else []),
        html.Ul([html.Li(g) for g in history.groups], id="report-moved-groups"),
        html.Table([html.Thead(html.Tr([html.Th(h) for h in HEADINGS])), html.Tbody(rows)],
                   className="grid-table"),
    ]


def moved_cases_section(history: AgainstHistory) -> html.Section:
    return html.Section([html.H2("Against history"),
                         html.P(history.summary, className="muted"),
                         html.Div(moved_list(history), id="report-moved-list")],
                        id="report-moved", className="moved-cases")
