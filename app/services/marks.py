"""Marks an admin puts on a report for its series' baselines: ``step`` (a known change of
level, e.g. an expected driver upgrade: baselines restart at the report) and ``outlier``
(a bad run: judged, never part of a baseline). Who (the token's name) and when are kept;
a mark is removed as it was put."""

from __future__ import annotations

from typing import Literal

from sqlalchemy.orm import Session

from app.core.errors import NotFound
from app.repository import history as history_repo

# A stored mark, as the API shapes it.
Mark = history_repo.Mark

MarkKind = Literal["step", "outlier"]


def put_mark(session: Session, report_id: int, kind: MarkKind, reason: str,
             created_by: str) -> history_repo.Mark:
    history_repo.require_report(session, report_id)
    history_repo.put_mark(session, report_id, kind, reason, created_by)
    return next(m for m in history_repo.report_marks(session, report_id) if m.kind == kind)


def delete_mark(session: Session, report_id: int, kind: MarkKind) -> None:
    history_repo.require_report(session, report_id)
    if not history_repo.delete_mark(session, report_id, kind):
        raise NotFound(f"report {report_id} has no {kind} mark")


def report_marks(session: Session, report_id: int) -> list[history_repo.Mark]:
    history_repo.require_report(session, report_id)
    return history_repo.report_marks(session, report_id)
