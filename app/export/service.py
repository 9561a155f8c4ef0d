"""The exports, from the database: what the API routes and the CLI call."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from app.case_fields import CaseFilter
from app.dashboard.report_view import report_data, report_view
from app.export.compare import compare_html
from app.export.footer import make_footer
from app.export.report import report_html
from app.report_json import report_json_bytes
from app.services.comparison import compare_reports
from app.services.history import report_regressions


@dataclass(frozen=True)
class Export:
    filename: str
    html: str


def export_report(session: Session, report_id: int, filters: CaseFilter,
                  now: datetime | None = None) -> Export:
    view = report_view(session, report_id, filters)
    footer = make_footer([(report_id, report_json_bytes(session, report_id))], now)
    history = report_regressions(session, report_id)
    return Export(f"moescope-report-{report_id}.html", report_html(view, footer, history))


def export_compare(session: Session, base_id: int, head_id: int,
                   now: datetime | None = None) -> Export:
    base, head = report_data(session, base_id), report_data(session, head_id)
    footer = make_footer([(base_id, report_json_bytes(session, base_id)),
                          (head_id, report_json_bytes(session, head_id))], now)
    result = compare_reports(session, base_id, head_id)
    return Export(f"moescope-compare-{base_id}-{head_id}.html",
                  compare_html(base.header, head.header, result, footer))
