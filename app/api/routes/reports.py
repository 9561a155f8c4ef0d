"""/api/v1/reports: ingest, append, read, export, delete. Thin: parse, call, shape."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Response
from pydantic import AfterValidator, StringConstraints

from app.api.deps import AdminToken, IngestToken, JsonBody, ReadAccess
from app.api.openapi import body_schema
from app.api.params import CaseFilterDep, ReportId, Text, no_nul
from app.api.schemas import (
    CasePage,
    CasesAppended,
    ReportCreated,
    ReportDetail,
    ReportPage,
    report_notes,
    report_summary,
)
from app.core.config import get_settings
from app.core.db import SessionDep, TransactionDep
from app.report_json import report_json_bytes
from app.repository import cases as cases_repo
from app.repository import reports as reports_repo
from app.services import cases as case_service
from app.services import reports as report_service
from ingest.schema import INT64_MAX, CaseList, Report

router = APIRouter(prefix="/reports", tags=["reports"])


# Bounds of the columns they are compared with: past them the database raises (a 500).
Offset = Annotated[int, Query(ge=0, le=INT64_MAX)]
ShortText = Annotated[str, StringConstraints(max_length=200), AfterValidator(no_nul)]

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Malformed JSON"},
    401: {"description": "Missing, unknown or revoked token"},
    403: {"description": "Token lacks the scope"},
    413: {"description": "Body over MOESCOPE_MAX_BODY_MB"},
    422: {"description": "Invalid report: every problem with its JSON path"},
    503: {"description": "Database unavailable (Retry-After)"},
}


@router.post(
    "",
    status_code=201,
    responses={200: {"description": "Already stored: same content or runId"}, **_ERRORS},
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
    responses={404: {"description": "No such report"},
               409: {"description": "A case id is stored with other content"}, **_ERRORS},
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


@router.get("")
def list_reports(
    _read: ReadAccess,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1)] = 20,
    offset: Offset = 0,
    q: Annotated[ShortText | None, Query(description="Search GPU, source, date")]
    = None,
    gpu: Annotated[ShortText | None, Query()] = None,
) -> ReportPage:
    """Reports, newest first. ``limit`` is capped at MOESCOPE_PAGE_SIZE_MAX."""
    limit = min(limit, get_settings().page_size_max)
    rows, total = reports_repo.list_reports(session, limit=limit, offset=offset, q=q, gpu=gpu)
    return ReportPage(
        items=[report_summary(r) for r in rows], total=total, limit=limit, offset=offset
    )


@router.get("/{report_id}", responses={404: {"description": "No such report"}})
def get_report(report_id: ReportId, _read: ReadAccess, session: SessionDep) -> ReportDetail:
    row = reports_repo.get_report(session, report_id)
    summary = {
        **cases_repo.facets(session, report_id),
        "caveatCounts": cases_repo.caveat_counts(session, report_id),
    }
    return ReportDetail(
        **report_summary(row).model_dump(),
        meta=row.meta,
        summary=summary,
        caveats=report_notes(row.meta),
    )


# The sortable names as an enum-like Literal, so OpenAPI lists them.
SortField = Literal[tuple(cases_repo.SORTABLE)]  # type: ignore[valid-type]


@router.get("/{report_id}/cases", responses={404: {"description": "No such report"}})
def list_cases(
    report_id: ReportId,
    _read: ReadAccess,
    session: SessionDep,
    filters: CaseFilterDep,
    sort: Annotated[
        SortField,  # type: ignore[valid-type]
        Query(description="Any wire or derived scalar field"),
    ] = "position",
    order: Literal["asc", "desc"] = "asc",
    limit: Annotated[int, Query(ge=1, le=1000)] = 1000,
    offset: Offset = 0,
) -> CasePage:
    """Cases with their derived fields and caveats. Repeat a filter to match any value."""
    rows, total = cases_repo.list_cases(
        session, report_id, filters=filters, sort=sort, descending=order == "desc",
        limit=limit, offset=offset,
    )
    return CasePage(items=case_service.cases_out(session, report_id, rows), total=total,
                    limit=limit, offset=offset)


# ``:path``: a case id may hold a '/' (sent as %2F, which the router sees decoded).
@router.get("/{report_id}/cases/{case_id:path}",
            responses={404: {"description": "No such case"}})
def get_case(
    report_id: ReportId, case_id: Annotated[Text, Path()], _read: ReadAccess, session: SessionDep
) -> dict[str, Any]:
    return case_service.get_case(session, report_id, case_id)


@router.get("/{report_id}/report.json", responses={404: {"description": "No such report"}})
def report_json(report_id: ReportId, _read: ReadAccess, session: SessionDep) -> Response:
    """The report exactly as posted, unknown fields included, appended cases in order."""
    return Response(
        content=report_json_bytes(session, report_id),
        media_type="application/json",
        headers={"Content-Disposition": f'inline; filename="report-{report_id}.json"'},
    )


@router.delete("/{report_id}", status_code=204, responses={404: {"description": "No such report"}})
def delete_report(report_id: ReportId, _token: AdminToken, session: TransactionDep) -> Response:
    reports_repo.delete_report(session, report_id)
    return Response(status_code=204)

