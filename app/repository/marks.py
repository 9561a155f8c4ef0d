"""All queries on marks: the steps and outliers an admin puts on a series' reports, each
with who put it there, when and why."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.models import MarkRow, ReportRow, utcnow
from app.repository.history import HISTORY_ORDER
from app.repository.reports import report_columns


@dataclass(frozen=True)
class Mark:
    id: int
    report_id: int
    kind: str
    reason: str
    created_by: str
    created_at: datetime
    date: str  # the marked report's date


def series_marks(session: Session, series: str) -> list[Mark]:
    """The marks on the series' reports, in history order."""
    rows = session.execute(
        select(MarkRow.id, MarkRow.report_id, MarkRow.kind, MarkRow.reason,
               MarkRow.created_by, MarkRow.created_at, ReportRow.date)
        .join(ReportRow, ReportRow.id == MarkRow.report_id)
        .where(ReportRow.series == series)
        .order_by(*HISTORY_ORDER, MarkRow.kind)
    ).all()
    return [Mark(*row) for row in rows]


def report_marks(session: Session, report_id: int) -> list[Mark]:
    rows = session.execute(
        select(MarkRow.id, MarkRow.report_id, MarkRow.kind, MarkRow.reason,
               MarkRow.created_by, MarkRow.created_at, ReportRow.date)
        .join(ReportRow, ReportRow.id == MarkRow.report_id)
        .where(MarkRow.report_id == report_id).order_by(MarkRow.kind)
    ).all()
    return [Mark(*row) for row in rows]


def put_mark(session: Session, report_id: int, kind: str, reason: str, created_by: str) -> None:
    """Mark the report (replacing a mark of the same kind: who and why are the latest)."""
    delete_mark(session, report_id, kind)
    session.add(MarkRow(report_id=report_id, kind=kind, reason=reason, created_by=created_by,
                        created_at=utcnow()))
    session.flush()


def delete_mark(session: Session, report_id: int, kind: str) -> bool:
    """Remove the report's mark of that kind; whether there was one."""
    result = session.execute(
        delete(MarkRow).where(MarkRow.report_id == report_id, MarkRow.kind == kind))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def require_report(session: Session, report_id: int) -> None:
    report_columns(session, report_id, ReportRow.id)  # NotFound when there is none
