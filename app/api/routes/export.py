"""The HTML exports as downloads: one report's view, and two reports compared."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from app.api.caching import read_headers
from app.api.deps import ReadAccess, Reports
from app.api.enums import DEFAULT_MATRIX_METRIC, MatrixMetricName
from app.api.params import CaseFilterDep, ReportId, ReportIdQuery
from app.api.responses import READ, errors
from app.api.sessions import SessionDep
from app.export.service import Export, export_compare, export_report

router = APIRouter(tags=["export"])

HTML_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/html": {"schema": {"type": "string"}}},
          "description": "The export, as a download"},
    **READ, **errors(404),
}


def download(export: Export) -> Response:
    return Response(
        content=export.html.encode("utf-8"), media_type="text/html; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{export.filename}"',
                 **read_headers()},
    )


@router.get("/reports/{report_id}/export.html", operation_id="export_report",
            response_class=Response, responses=HTML_RESPONSES)
def report_export(
    report_id: ReportId, _read: ReadAccess, session: SessionDep, filters: CaseFilterDep,
    reports: Reports,
    matrix_metric: Annotated[MatrixMetricName, Query(
        alias="matrixMetric", description="the configuration matrix's metric shown when the "
        "file opens (the file holds every metric's matrix, picked by a control)")
    ] = DEFAULT_MATRIX_METRIC,
) -> Response:
    """The report page's view as one offline HTML file (the case filters of /cases)."""
    return download(export_report(session, report_id, filters, reports=reports,
                                   matrix_metric=str(matrix_metric)))


@router.get("/compare/export.html", operation_id="export_compare", response_class=Response,
            responses=HTML_RESPONSES)
def compare_export(base: ReportIdQuery, head: ReportIdQuery, _read: ReadAccess,
                   session: SessionDep, reports: Reports) -> Response:
    """The compare page (``base`` against ``head``) as one offline HTML file."""
    return download(export_compare(session, base, head, reports=reports))
