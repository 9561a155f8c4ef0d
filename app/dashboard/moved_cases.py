"""The report page's marks of the cases that moved against their history: a summary of
the flagged ones above the charts, and a column of the case table linking each case to
its history page."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from app.services.history_view import ReportMarks

# Filled from the store of marks (see report.py's rowData callback): every row gets its
# case's historyChange, historyStatus and historyHref.
TREND_COLUMN: dict[str, Any] = {
    "field": "historyChange", "headerName": "vs history %", "cellRenderer": "HistoryTrend",
    "filter": "agNumberColumnFilter", "minWidth": 120,
}


def moved_cases_section(marks: ReportMarks) -> html.Section:
    flagged = marks.verdicts.flagged
    settings = marks.verdicts.settings
    if not marks.judged:
        summary = ("No case has 3 earlier reports in its series yet (same GPU and shape): "
                   "nothing is judged against history.")
    else:
        summary = (f"{len(flagged)} of {marks.judged} cases judged moved past "
                   f"{settings.threshold_percent:g} % and past their noise, against the "
                   f"median of up to {settings.window} earlier reports.")
    rows = [html.Tr([
        html.Td(item.verdict.status, className=f"trend trend-{item.verdict.status}"),
        html.Td(dcc.Link(item.case_id, href=marks.marks[item.case_id]["historyHref"])),
        html.Td(f"{item.verdict.change_percent:+.1f} %"),
        html.Td(f"{item.verdict.baseline:.4g} ms, median of {item.verdict.baseline_points}"),
        html.Td(f"{item.verdict.noise_percent:.1f} %"),
    ]) for item in flagged]
    body: list[Any] = [html.P(summary, className="muted")]
    if rows:
        body.append(html.Table([
            html.Thead(html.Tr([html.Th(h) for h in (
                "verdict", "case (its history)", "layer time change", "baseline", "noise")])),
            html.Tbody(rows)], className="grid-table"))
    return html.Section([html.H2("Against history"), *body], id="report-moved",
                        className="moved-cases")
