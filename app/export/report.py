"""One report's export: what the dashboard's report page shows for a set of filters (its
view, charts, notes, caveat counts and case table), as one HTML document."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.case_fields import TABLED, CaseDict, CaseFilter
from app.export.document import export_spec, render
from app.export.footer import Footer
from app.export.summary import best_text, summary_rows
from app.matrix_metrics import DEFAULT_METRIC, METRICS, metric_for
from app.services.case_table import table_row
from app.services.case_text import display_value, table_number
from app.services.history import CaseVerdict, ReportVerdicts
from app.services.matrix import build_matrix
from app.services.report_view import ReportView
from ingest.derived import CAVEAT_MEANINGS, report_notes
from ingest.grouping import Flagged, group_flagged
from ingest.provenance import FIELDS, provenance
from ingest.regressions import MAD_TO_SIGMA, Settings


@dataclass(frozen=True)
class Cell:
    text: str
    numeric: bool


def _cells(case: CaseDict) -> list[Cell]:
    row = table_row(case)
    return [Cell(_text(row.get(f.wire)), f.kind in (int, float)) for f in TABLED]


def _text(value: Any) -> str:
    """A table cell as the page's grid shows it (numbers to 4 significant digits)."""
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return table_number(value)
    return display_value(value)


def filters_text(filters: CaseFilter) -> str:
    """The filters of the view, as the page's URL spells them ('' when none)."""
    return ", ".join(
        f"{f.wire} = {' or '.join(display_value(v) for v in values)}"
        for f, values in filters.active())


def chart_id(key: str) -> str:
    return f"chart-{key}"


@dataclass(frozen=True)
class AgainstHistory:
    """The export's regressions section: the flagged cases in view, and how many cases
    in view had enough history to be judged."""

    judged: int
    flagged: list[CaseVerdict]
    settings: Settings
    groups: list[str]  # the flagged cases in view grouped by the dimensions they share


def against_history(view: ReportView, verdicts: ReportVerdicts) -> AgainstHistory | None:
    """None when no case in view has history to be judged against: no section."""
    in_view = {case["id"]: case for case in view.cases}
    items = [i for i in verdicts.items if i.case_id in in_view]
    judged = sum(1 for i in items if i.verdict.status != "insufficient_history")
    if not judged:
        return None
    flagged = [i for i in items if i.verdict.flagged]
    groups = group_flagged([Flagged(in_view[i.case_id], i.verdict.status,
                                    i.verdict.change_percent or 0.0) for i in flagged],
                           view.cases)
    return AgainstHistory(judged, flagged, verdicts.settings, [g.text() for g in groups])


def report_html(view: ReportView, footer: Footer, verdicts: ReportVerdicts | None = None,
                matrix_metric: str = DEFAULT_METRIC, alerts: Sequence[str] = ()) -> str:
    """``matrix_metric``: the matrix shown first; the file holds one per metric and a
    control to pick another, as the page's (the export is offline: no server to ask).
    ``alerts``: the why of each alert of the report (app.services.alerts)."""
    header = view.header
    chosen = metric_for(matrix_metric).key
    # A chart with nothing to show is left out, one line saying why (as on the page).
    charts = {chart_id(p.key): export_spec(p.figure) for p in view.panels if not p.absent}
    matrices = [build_matrix(view.cases, metric) for metric in METRICS]
    return render(
        "report.html.j2", charts,
        title=f"moescope report {header.id}: {header.gpu} {header.date}",
        header=header, view=view, filters=filters_text(view.filters), alerts=list(alerts),
        host={FIELDS[key]: value for key, value in provenance(view.meta).items()},
        notes=report_notes(view.meta), caveats=view.caveats,
        summary=summary_rows(view.cases), panels=view.panels, chart_id=chart_id,
        matrices=matrices, matrix_metric=chosen, meanings=CAVEAT_MEANINGS,
        columns=[(f.wire, f.label) for f in TABLED],
        rows=[(_cells(case), [c["code"] for c in case.get("caveats", [])])
              for case in view.cases],
        history=against_history(view, verdicts) if verdicts else None,
        footer=footer, fmt=_fmt, best_text=best_text, mad_to_sigma=MAD_TO_SIGMA,
    )


def _fmt(value: Any, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"
