"""The exports, from the database: what the API routes and the CLI call.

Each export imports its own screen's modules when called: ``moescope export`` of one
report is a fresh process, and the compare and platforms screens' imports (comparison,
platforms, their figures) would be most of its time (the target: 1.2 s in all,
bench/export.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from app.case_fields import CaseFilter
from app.export.footer import make_footer
from app.export.report import report_html
from app.matrix_metrics import DEFAULT_METRIC
from app.services.report_json import report_json_bytes
from app.services.report_page import ReportChoices, report_page
from app.services.report_view import ReportCache


@dataclass(frozen=True)
class Export:
    filename: str
    html: str


def export_report(session: Session, report_id: int, filters: CaseFilter, *,
                  reports: ReportCache | None = None, now: datetime | None = None,
                  matrix_metric: str = DEFAULT_METRIC) -> Export:
    """``reports``: the app's cache; a one-off export (the CLI's) reads without one.
    ``matrix_metric``: the configuration matrix's metric shown when the file opens."""
    page = report_page(reports or ReportCache(), session, report_id, filters,
                       ReportChoices(matrix_metric=matrix_metric))
    footer = make_footer([(report_id, report_json_bytes(session, report_id))], now)
    return Export(f"moescope-report-{report_id}.html", report_html(page, footer))


def export_compare(session: Session, base_id: int, head_id: int, *,
                   reports: ReportCache | None = None, now: datetime | None = None) -> Export:
    from app.export.compare import compare_html
    from app.services.compare_page import compare_page

    page = compare_page(reports or ReportCache(), session, base_id, head_id)
    footer = make_footer([(base_id, report_json_bytes(session, base_id)),
                          (head_id, report_json_bytes(session, head_id))], now)
    return Export(f"moescope-compare-{base_id}-{head_id}.html", compare_html(page, footer))


def export_platforms(session: Session, report_ids: list[int] | None, baseline_id: int | None,
                     *, modes: list[str], precisions: list[str],
                     now: datetime | None = None) -> Export:
    from app.export.platforms import platforms_html
    from app.services.platforms import platforms_page

    page = platforms_page(session, report_ids, baseline_id, modes=modes, precisions=precisions)
    ids = [p.report_id for p in page.platforms]
    footer = make_footer([(i, report_json_bytes(session, i)) for i in ids], now)
    return Export(f"moescope-platforms-{'-'.join(map(str, ids))}.html",
                  platforms_html(page, footer))
