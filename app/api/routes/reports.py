"""/api/v1/reports: ingest, append, read, export, delete. Thin: parse, call, shape."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from fastapi.exceptions import RequestValidationError
from pydantic import AfterValidator, Field, StringConstraints

from app.api.caching import ReportVersion, Revalidate, read_headers
from app.api.case_schema import CaseOut
from app.api.deps import AdminToken, IngestToken, JsonBody, ReadAccess
from app.api.enums import CaseSort, SortOrder
from app.api.openapi import body_schema
from app.api.params import NO_NUL_PATTERN, CaseFilterDep, ReportId, Text, no_nul
from app.api.responses import NOT_MODIFIED, READ, WRITE, errors
from app.api.schemas import (
    CasePage,
    CasesAppended,
    ReportCreated,
    ReportDetail,
    ReportPage,
    report_notes,
    report_summary,
)
from app.api.sessions import SessionDep, TransactionDep
from app.core.config import get_settings
from app.services import case_pages
from app.services import cases as case_service
from app.services import reports as report_service
from app.services.report_detail import report_detail
from app.services.report_json import report_json_bytes
from app.services.report_list import report_page
from ingest.schema import INT64_MAX, CaseList, Report

router = APIRouter(prefix="/reports", tags=["reports"])


# Bounds of the columns they are compared with: past them the database raises (a 500).
Offset = Annotated[int, Query(ge=0, le=INT64_MAX)]
# The length checked on the string itself (after the NUL check it would be a generic
# "items" bound, with pydantic's list wording).
ShortText = Annotated[str, StringConstraints(max_length=200), AfterValidator(no_nul),
                      Field(json_schema_extra={"pattern": NO_NUL_PATTERN})]

# One report's reads: the report can be missing, and the client can hold its version.
_REPORT_READ = {**NOT_MODIFIED, **READ, **errors(404)}


@router.post(
    "",
    status_code=201,
    responses={200: {"model": ReportCreated,
                     "description": "Already stored: the same content (as first posted or "
                                    "as it stands after appends) or runId"},
               **WRITE, **errors(409)},
    openapi_extra=body_schema(Report),
)
def post_report(
    _token: IngestToken, body: JsonBody, session: TransactionDep, response: Response
) -> ReportCreated:
    """Ingest a whole report. Posting the same report again is harmless."""
    result = report_service.ingest(session, body)
    if not result.created:
        response.status_code = 200
    response.headers["Location"] = f"/api/v1/reports/{result.id}"
    return ReportCreated(id=result.id, caseCount=result.case_count, created=result.created)


@router.post(
    "/{report_id}/cases",
    responses={**WRITE, **errors(404, 409)},
    openapi_extra=body_schema(CaseList),
)
def append_cases(
    report_id: ReportId, _token: IngestToken, body: JsonBody, session: TransactionDep
) -> CasesAppended:
    """Append cases as they finish. An identical case again is a no-op."""
    result = report_service.append(session, report_id, body)
    return CasesAppended(
        id=report_id, caseCount=result.case_count, added=result.added, unchanged=result.unchanged
    )


@router.get("", dependencies=[Revalidate], responses=READ)
def list_reports(
    _read: ReadAccess,
    session: SessionDep,
    # The maximum is MOESCOPE_PAGE_SIZE_MAX, set in the schema when the app is built.
    limit: Annotated[int, Query(ge=1, description="at most MOESCOPE_PAGE_SIZE_MAX")] = 20,
    offset: Offset = 0,
    q: Annotated[ShortText | None, Query(description="Search GPU, source, date")]
    = None,
    gpu: Annotated[ShortText | None, Query()] = None,
) -> ReportPage:
    """Reports, newest first."""
    page_max = get_settings().page_size_max
    if limit > page_max:
        raise RequestValidationError([{
            "loc": ("query", "limit"), "type": "less_than_equal", "input": limit,
            "msg": f"Input should be less than or equal to {page_max} (MOESCOPE_PAGE_SIZE_MAX)",
        }])
    rows, total = report_page(session, limit=limit, offset=offset, q=q, gpu=gpu)
    return ReportPage(
        items=[report_summary(r) for r in rows], total=total, limit=limit, offset=offset
    )


@router.get("/{report_id}", responses=_REPORT_READ, response_model_exclude_unset=True)
def get_report(report_id: ReportId, _read: ReadAccess, _version: ReportVersion,
               session: SessionDep) -> ReportDetail:
    detail = report_detail(session, report_id)
    return ReportDetail(
        **report_summary(detail.row).model_dump(),
        meta=detail.row.meta,
        summary=detail.summary,
        caveats=report_notes(detail.row.meta),
    )


# exclude_unset: a case answers what was posted (no nulls for fields it did not send),
# its derived fields and its caveats.
@router.get("/{report_id}/cases", responses=_REPORT_READ, response_model_exclude_unset=True)
def list_cases(
    report_id: ReportId,
    _read: ReadAccess,
    version: ReportVersion,
    session: SessionDep,
    filters: CaseFilterDep,
    sort: Annotated[
        CaseSort,
        Query(description="Report order, or any sortable wire or derived field"),
    ] = CaseSort.position,  # type: ignore[attr-defined]
    order: SortOrder = SortOrder.asc,
    limit: Annotated[int, Query(ge=1, le=1000)] = 1000,
    offset: Offset = 0,
) -> CasePage:
    """Cases with their derived fields and caveats. Repeat a filter to match any value."""
    items, total = case_pages.case_page(
        session, report_id, version, filters=filters, sort=sort.value,
        descending=order is SortOrder.desc, limit=limit, offset=offset,
    )
    return CasePage(items=items, total=total, limit=limit, offset=offset)


# ``:path``: a case id may hold a '/' (sent as %2F, which the router sees decoded).
@router.get("/{report_id}/cases/{case_id:path}", response_model=CaseOut,
            responses=_REPORT_READ, response_model_exclude_unset=True)
def get_case(
    report_id: ReportId, case_id: Annotated[Text, Path()], _read: ReadAccess,
    _version: ReportVersion, session: SessionDep,
) -> dict[str, Any]:
    return case_service.get_case(session, report_id, case_id)


@router.get(
    "/{report_id}/report.json", operation_id="get_report_json", response_class=Response,
    responses={200: {"model": Report, "description": "The report as posted"}, **_REPORT_READ},
)
def report_json(report_id: ReportId, _read: ReadAccess, version: ReportVersion,
                session: SessionDep) -> Response:
    """The report exactly as posted, unknown fields included, appended cases in order."""
    return Response(
        content=report_json_bytes(session, report_id),
        media_type="application/json",
        headers={"Content-Disposition": f'inline; filename="report-{report_id}.json"',
                 **read_headers(version)},
    )


@router.delete("/{report_id}", status_code=204, responses=errors(401, 403, 404, 422, 503))
def delete_report(report_id: ReportId, _token: AdminToken, session: TransactionDep) -> Response:
    report_service.delete(session, report_id)
    return Response(status_code=204)

