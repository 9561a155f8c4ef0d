"""The report page's marks of the cases that moved against their history: a summary of
the flagged ones in view above the charts (grouped by the dimensions they share, then one
by one), and a column of the case table linking each case to its history page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dash import dcc, html

from app.case_fields import CaseDict
from app.services.history_view import ReportMarks
from ingest.attribution import Attribution
from ingest.grouping import Flagged, group_flagged

# Filled from the store of marks (see report.py's rowData callback): every row gets its
# case's historyChange, historyStatus and historyHref.
TREND_COLUMN: dict[str, Any] = {
    "field": "historyChange", "headerName": "vs history %", "cellRenderer": "HistoryTrend",
    "filter": "agNumberColumnFilter", "minWidth": 120,
}


def add_why(marks: dict[str, dict[str, Any]], why: Mapping[str, Attribution]) -> None:
    """Each flagged case's mark gets ``historyWhy``: the phase or GPU-state change that
    explains it (kept in the page's store, so the filter callback redraws it too)."""
    for case_id, attribution in why.items():
        if case_id in marks and attribution.text():
            marks[case_id]["historyWhy"] = attribution.text()


def _flagged_in_view(marks: Mapping[str, Mapping[str, Any]],
                     cases: Sequence[CaseDict]) -> list[tuple[CaseDict, Mapping[str, Any]]]:
    return [(c, marks[c["id"]]) for c in cases
            if marks.get(c["id"], {}).get("historyStatus") in ("regression", "improvement")]


def moved_list(marks: Mapping[str, Mapping[str, Any]], cases: Sequence[CaseDict]) -> list[Any]:
    """The flagged cases in view (the page's filter), grouped by the dimensions they share,
    then one by one: what the list shows, and what the filter callback redraws from the
    store of marks (no history query)."""
    flagged = _flagged_in_view(marks, cases)
    everywhere = sum(1 for m in marks.values()
                     if m.get("historyStatus") in ("regression", "improvement"))
    if not flagged:
        return [html.P("No moved case is in view." if everywhere else "", className="muted",
                       id="report-moved-groups")]
    groups = group_flagged([Flagged(c, m["historyStatus"], m["historyChange"])
                            for c, m in flagged], cases)
    rows = [html.Tr([
        html.Td(m["historyStatus"], className=f"trend trend-{m['historyStatus']}"),
        html.Td(dcc.Link(c["id"], href=m["historyHref"])),
        html.Td(f"{m['historyChange']:+.1f} %"),
        html.Td(f"{m['historyBaseline']:.4g} ms, median of {m['historyBaselinePoints']}"),
        html.Td(f"{m['historyNoise']:.1f} %"),
        html.Td(m.get("historyWhy") or "no phases or GPU state to compare"),
    ]) for c, m in flagged]
    in_view = ("" if len(flagged) == everywhere
               else f"{len(flagged)} of the {everywhere} moved cases are in view.")
    return [
        *([html.P(in_view, className="muted", id="report-moved-in-view")] if in_view else []),
        html.Ul([html.Li(g.text()) for g in groups], id="report-moved-groups"),
        html.Table([
            html.Thead(html.Tr([html.Th(h) for h in (
                "verdict", "case (its history)", "layer time change", "baseline", "noise",
                "why: phases, GPU state")])),
            html.Tbody(rows)], className="grid-table"),
    ]


def moved_cases_section(marks: ReportMarks, cases: Sequence[CaseDict]) -> html.Section:
    """``cases``: the cases in view."""
    flagged = marks.verdicts.flagged
    settings = marks.verdicts.settings
    if not marks.judged:
        summary = (f"No case has {settings.min_points} earlier reports in its series yet "
                   "(same GPU and shape): nothing is judged against history.")
    else:
        summary = (f"{len(flagged)} of {marks.judged} cases judged moved past "
                   f"{settings.threshold_percent:g} % and past their noise, against the "
                   f"median of up to {settings.window} earlier reports.")
    return html.Section([html.H2("Against history"), html.P(summary, className="muted"),
                         html.Div(moved_list(marks.marks, cases), id="report-moved-list")],
                        id="report-moved", className="moved-cases")
