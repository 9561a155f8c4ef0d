"""Marks an admin puts on a report for its series' baselines: ``step`` (a known change of
level, e.g. an expected driver upgrade: baselines restart at the report) and ``outlier``
(a bad run: judged, never part of a baseline). Who (the token's name) and when are kept;
a mark is removed as it was put."""

from __future__ import annotations

from typing import Literal

from sqlalchemy.orm import Session

from app.core.errors import NotFound
from app.repository import marks as marks_repo
from app.services.auth import authorise

# A stored mark, as the API shapes it.
Mark = marks_repo.Mark

MarkKind = Literal["step", "outlier"]

REASON_MAX_CHARS = 2000


def reason_problem(reason: str) -> str | None:
    """Why a mark's reason is refused, naming the field (the API's body schema checks the
    same), or None."""
    if not reason.strip():
        return "reason: say why the report is marked (it is shown on the history)"
    if len(reason) > REASON_MAX_CHARS:
        return f"reason: at most {REASON_MAX_CHARS} characters, not {len(reason)}"
    if "\x00" in reason:
        return "reason: contains a NUL character"
    return None


def put_mark(session: Session, report_id: int, kind: MarkKind, reason: str,
             created_by: str) -> marks_repo.Mark:
    marks_repo.require_report(session, report_id)
    marks_repo.put_mark(session, report_id, kind, reason, created_by)
    return next(m for m in marks_repo.report_marks(session, report_id) if m.kind == kind)


def delete_mark(session: Session, report_id: int, kind: MarkKind) -> None:
    marks_repo.require_report(session, report_id)
    if not marks_repo.delete_mark(session, report_id, kind):
        raise NotFound(f"report {report_id} has no {kind} mark")


def report_marks(session: Session, report_id: int) -> list[marks_repo.Mark]:
    marks_repo.require_report(session, report_id)
    return marks_repo.report_marks(session, report_id)


def change_mark(session: Session, token: str | None, report_id: int, kind: MarkKind,
                reason: str | None) -> str:
    """What the history page's controls do for whoever holds ``token`` (the sign-in
    cookie's): put the mark (``reason`` given) or remove it (``reason`` None), as the API
    does, behind the API's admin check. Returns what happened in words; raises
    Unauthorized or Forbidden (not an admin), NotFound, or ValueError (a bad reason, its
    field named). The caller commits."""
    who = authorise(session, token, "admin").name
    if reason is None:
        delete_mark(session, report_id, kind)
        return f"report #{report_id}: {kind} mark removed"
    problem = reason_problem(reason)
    if problem is not None:
        raise ValueError(problem)
    put_mark(session, report_id, kind, reason.strip(), who)
    return f"report #{report_id} marked as {'a step' if kind == 'step' else 'an outlier'}"
