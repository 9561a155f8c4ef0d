"""Marks on a report for its series' baselines (``app.services.marks``): admin scope to
put or remove, read scope to read."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import AdminToken, ReadAccess
from app.api.history_schemas import MarkIn, MarkOut, mark_out
from app.api.params import ReportId
from app.api.responses import READ, errors
from app.api.sessions import SessionDep, TransactionDep
from app.services import marks
from app.services.marks import MarkKind

router = APIRouter(prefix="/reports/{report_id}/marks", tags=["history"])

_READ = {**READ, **errors(404)}
# A mark's writes: the admin token, the report (to delete: the mark) and the body's reason.
_WRITE = errors(401, 403, 404, 422, 503)


@router.get("", operation_id="list_marks", responses=_READ)
def list_marks(report_id: ReportId, _read: ReadAccess, session: SessionDep) -> list[MarkOut]:
    """The report's marks: a step restarts its series' baselines at it; an outlier is left
    out of every baseline."""
    return [mark_out(m) for m in marks.report_marks(session, report_id)]


@router.put("/{kind}", operation_id="put_mark", responses=_WRITE)
def put_mark(report_id: ReportId, kind: MarkKind, body: MarkIn, token: AdminToken,
             session: TransactionDep) -> MarkOut:
    """Mark the report (again: the reason, who and when are replaced)."""
    return mark_out(marks.put_mark(session, report_id, kind, body.reason, token.name))


@router.delete("/{kind}", operation_id="delete_mark", status_code=204, responses=_WRITE)
def delete_mark(report_id: ReportId, kind: MarkKind, _token: AdminToken,
                session: TransactionDep) -> Response:
    marks.delete_mark(session, report_id, kind)
    return Response(status_code=204)



