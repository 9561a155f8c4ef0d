"""GET /api/v1/reports/{id}/matrix: the configuration matrix as JSON or CSV, so a notebook
gets it in one call. Thin: parse, call app.services.matrix, shape."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import JSONResponse

from app.api.deps import ReadAccess
from app.api.enums import DEFAULT_MATRIX_METRIC, MatrixMetricName
from app.api.params import CaseFilterDep, ReportId
from app.api.responses import READ, errors
from app.api.sessions import SessionDep
from app.services.matrix import matrix_csv, matrix_json, report_matrix

router = APIRouter(prefix="/reports", tags=["reports"])


_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/json": {}, "text/csv": {}},
          "description": "Rows: configurations (mode, EP, category, F, imbalance), grouped by "
                         "mode; columns: precision x pipeline; a cell is null (CSV: empty) "
                         "where that combination was not run; a cell names the case it shows "
                         "(`caseId`) and every case of the report run there (`caseIds`, "
                         "`count`); `best` is the column of the row's best cell (never a case "
                         "caveated above_peak, numerical_not_accepted or failed), `ties` every "
                         "column within noise of it (windowSpreadPercent), the best included"},
    **READ, **errors(404),
}


def _wants_csv(format_: str | None, accept: str | None) -> bool:
    if format_ is not None:
        return format_ == "csv"
    return "text/csv" in (accept or "")


@router.get("/{report_id}/matrix", operation_id="get_matrix", response_class=Response,
            responses=_RESPONSES)
def get_matrix(
    report_id: ReportId, _read: ReadAccess, session: SessionDep, filters: CaseFilterDep,
    metric: Annotated[MatrixMetricName, Query()] = DEFAULT_MATRIX_METRIC,
    format_: Annotated[Literal["json", "csv"] | None, Query(alias="format")] = None,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """The configuration matrix of the cases that pass the /cases filters, one metric per
    cell (`format=csv` or `Accept: text/csv` for CSV)."""
    matrix = report_matrix(session, report_id, filters, str(metric))
    if _wants_csv(format_, accept):
        return Response(
            matrix_csv(matrix), media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition":
                     f'attachment; filename="moescope-matrix-{report_id}-{metric}.csv"'})
    return JSONResponse(matrix_json(matrix))
