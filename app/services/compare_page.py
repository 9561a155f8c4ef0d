"""The compare screen's read model: two reports matched by case id, as the compare page and
the compare export both show them (text cells from ``compare_text``, the ratio chart from
``figures.compare_charts``), built by one call."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.figures import compare_charts
from app.figures.style import Spec
from app.services import compare_text
from app.services.alert_list import Alert, alerts_of
from app.services.compare_text import CaseCells
from app.services.comparison import Comparison, compare_reports, ratio_points
from app.services.report_view import ReportCache, ReportHeader


@dataclass(frozen=True)
class ComparePage:
    base: ReportHeader
    head: ReportHeader
    result: Comparison
    chart: Spec  # each matched case's head/base layer time
    summary: str
    series_line: str  # whether the verdicts are the series' history's or the pair's
    groups: tuple[str, ...]  # the moved cases grouped by the dimensions they share
    provenance: tuple[list[str], ...]  # (meta field, base, head) that differ
    geomeans: tuple[list[str], ...]
    cases: tuple[CaseCells, ...]  # regressions first
    alerts: tuple[Alert, ...]  # the head report's


def compare_page(reports: ReportCache, session: Session, base_id: int, head_id: int
                 ) -> ComparePage:
    """NotFound when either report does not exist."""
    base, head = reports.report(session, base_id), reports.report(session, head_id)
    result = compare_reports(session, base_id, head_id)
    return ComparePage(
        base=base.header, head=head.header, result=result,
        chart=compare_charts.ratio_spec(ratio_points(result),
                                        result.settings.threshold_percent, base_id, head_id),
        summary=result.summary_text(), series_line=compare_text.series_line(result),
        groups=tuple(compare_text.group_lines(result)),
        provenance=tuple(compare_text.provenance_rows(result)),
        geomeans=tuple(compare_text.geomean_rows(result)),
        cases=tuple(compare_text.case_cells(row) for row in result.rows),
        alerts=tuple(alerts_of(session, report_ids=[head_id])))
