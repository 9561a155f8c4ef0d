"""GET /api/v1/platforms?reports=1,9[&baseline=9]: reports of different GPUs side by side,
matched by configuration, as JSON or CSV. Thin: parse, call app.services.platforms, shape."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from app.api.deps import ReadAccess
from app.api.params import ReportIdQuery, Text
from app.api.responses import READ, errors
from app.api.sessions import SessionDep
from app.services.platforms import platforms_page
from app.services.platforms_text import platforms_csv
from ingest.schema import INT32_MAX

router = APIRouter(tags=["platforms"])

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/json": {}, "text/csv": {}},
          "description": "Rows: (configuration, precision, pipeline) matched across the "
                         "reports; one cell per report: useful TF/GPU, ratio to the baseline, "
                         "TF/W, best and tied (within noise), why not run; geometric means "
                         "of the ratios per (mode, precision)"},
    **READ, **errors(404),
}


def _invalid(field: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("query", field), "msg": message,
                                    "type": "value_error"}])


def parse_ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise _invalid("reports", "a comma-separated list of report ids") from None
    if any(not 1 <= i <= INT32_MAX for i in ids):
        raise _invalid("reports", f"report ids are 1 to {INT32_MAX}")
    if not ids or len(set(ids)) != len(ids):
        raise _invalid("reports", "one or more distinct report ids")
    return ids


@router.get("/platforms", operation_id="get_platforms", response_class=Response,
            responses=_RESPONSES)
def get_platforms(
    _read: ReadAccess, session: SessionDep,
    reports: Annotated[Text, Query(description="report ids, comma-separated: 1,9")],
    baseline: ReportIdQuery | None = None,
    format_: Annotated[Literal["json", "csv"] | None, Query(alias="format")] = None,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """The picked reports side by side, matched by configuration, against a baseline
    (`format=csv` or `Accept: text/csv` for CSV)."""
    ids = parse_ids(reports)
    if baseline is not None and baseline not in ids:
        raise _invalid("baseline", "must be one of reports")
    page = platforms_page(session, ids, baseline)
    wants_csv = format_ == "csv" if format_ is not None else "text/csv" in (accept or "")
    if wants_csv:
        return Response(platforms_csv(page), media_type="text/csv; charset=utf-8")
    return JSONResponse({**dataclasses.asdict(page), "headline": page.headline})
