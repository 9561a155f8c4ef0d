"""The exports, from the database: what the API routes and the CLI call."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from app.case_fields import CaseFilter
from app.export.compare import compare_html
from app.export.footer import make_footer
from app.export.report import report_html
from app.matrix_metrics import DEFAULT_METRIC
from app.services.alerts import alerts_of
from app.services.comparison import compare_reports
from app.services.history import report_regressions
from app.services.report_json import report_json_bytes
from app.services.report_view import ReportCache, report_view


@dataclass(frozen=True)
class Export:
    filename: str
    html: str


def export_report(session: Session, report_id: int, filters: CaseFilter, *,
                  reports: ReportCache | None = None, now: datetime | None = None,
                  matrix_metric: str = DEFAULT_METRIC) -> Export:
    """``reports``: the app's cache; a one-off export (the CLI's) reads without one.
    ``matrix_metric``: the configuration matrix's metric shown when the file opens."""
    view = report_view(reports or ReportCache(), session, report_id, filters)
    footer = make_footer([(report_id, report_json_bytes(session, report_id))], now)
    history = report_regressions(session, report_id)
    whys = [a.opened.why for a in alerts_of(session, report_ids=[report_id])]
    return Export(f"moescope-report-{report_id}.html",
                  report_html(view, footer, history, matrix_metric, whys))


def export_compare(session: Session, base_id: int, head_id: int, *,
                   reports: ReportCache | None = None, now: datetime | None = None) -> Export:
    reports = reports or ReportCache()
    base, head = reports.report(session, base_id), reports.report(session, head_id)
    footer = make_footer([(base_id, report_json_bytes(session, base_id)),
                          (head_id, report_json_bytes(session, head_id))], now)
    result = compare_reports(session, base_id, head_id)
    return Export(f"moescope-compare-{base_id}-{head_id}.html",
                  compare_html(base.header, head.header, result, footer))
