"""GET /api/v1/platforms[?reports=1,9][&baseline=9][&mode=][&precision=]: reports of
different GPUs side by side, matched by configuration, as JSON or CSV; and
/platforms/export.html, the same as one offline HTML file. Thin: parse, call one service,
shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Response
from fastapi.exceptions import RequestValidationError

from app.api.deps import ReadAccess
from app.api.params import ReportIdQuery, Text
from app.api.responses import READ, errors
from app.api.routes.export import HTML_RESPONSES as _HTML
from app.api.routes.export import download
from app.api.sessions import SessionDep
from app.export.service import export_platforms
from app.services.platforms import platforms_page
from app.services.platforms_text import platforms_csv, platforms_json
from ingest.schema import INT32_MAX

router = APIRouter(tags=["platforms"])

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/json": {}, "text/csv": {}},
          "description": "Rows: (configuration, precision, pipeline) matched across the "
                         "reports; one cell per report: useful TF/GPU, ratio to the baseline, "
                         "TF/W, best and tied (within noise), why not run; geometric means "
                         "of the ratios per (mode, precision); winners: a row per "
                         "configuration, a cell per (platform, precision, pipeline), best "
                         "and tied over the whole row"},
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


@dataclass(frozen=True)
class Pick:
    """The query both routes take: which reports, against which, which configurations."""

    ids: list[int] | None
    baseline: int | None
    modes: list[str]
    precisions: list[str]


def pick(
    reports: Annotated[Text | None, Query(
        description="report ids, comma-separated: 1,9 (default: the newest report of each "
                    "GPU in the database, newest first)")] = None,
    baseline: ReportIdQuery | None = None,
    mode: Annotated[list[Text] | None, Query(description="keep these modes (repeat)")] = None,
    precision: Annotated[list[Text] | None, Query(
        description="keep these precisions (repeat)")] = None,
) -> Pick:
    ids = parse_ids(reports) if reports is not None else None
    if baseline is not None and ids is not None and baseline not in ids:
        raise _invalid("baseline", "must be one of reports")
    return Pick(ids, baseline, list(mode or ()), list(precision or ()))


PickDep = Annotated[Pick, Depends(pick)]


def _baseline_outside(exc: ValueError) -> RequestValidationError:
    # Only a baseline outside the default pick gets here; the rest is checked in pick().
    return _invalid("baseline", f"must be one of the picked reports ({exc})")


@router.get("/platforms", operation_id="get_platforms", response_class=Response,
            responses=_RESPONSES)
def get_platforms(
    _read: ReadAccess, session: SessionDep, chosen: PickDep,
    format_: Annotated[Literal["json", "csv"] | None, Query(alias="format")] = None,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """The picked reports side by side, matched by configuration, against a baseline
    (`format=csv` or `Accept: text/csv` for CSV)."""
    try:
        page = platforms_page(session, chosen.ids, chosen.baseline, modes=chosen.modes,
                              precisions=chosen.precisions)
    except ValueError as exc:
        raise _baseline_outside(exc) from exc
    wants_csv = format_ == "csv" if format_ is not None else "text/csv" in (accept or "")
    if wants_csv:
        return Response(platforms_csv(page), media_type="text/csv; charset=utf-8")
    return Response(platforms_json(page), media_type="application/json")


@router.get("/platforms/export.html", operation_id="export_platforms",
            response_class=Response, responses=_HTML)
def platforms_export(_read: ReadAccess, session: SessionDep, chosen: PickDep) -> Response:
    """The platforms page as one offline HTML file."""
    try:
        export = export_platforms(session, chosen.ids, chosen.baseline, modes=chosen.modes,
                                  precisions=chosen.precisions)
    except ValueError as exc:
        raise _baseline_outside(exc) from exc
    return download(export)
