"""History of a case's series, and the regressions a report shows against it."""

from __future__ import annotations

from datetime import date
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.exceptions import RequestValidationError
from pydantic import StringConstraints

from app.api.caching import Revalidate
from app.api.deps import ReadAccess
from app.api.history_schemas import (
    HistoryOut,
    ReportRegressions,
    history_out,
    report_regressions_out,
)
from app.api.params import ReportId, Text
from app.api.responses import READ, errors
from app.api.sessions import SessionDep
from app.services.explain import explain
from app.services.history import (
    DEFAULT_MAX_POINTS,
    MAX_POINTS,
    MIN_HISTORY_ENTRIES,
    case_history,
    report_regressions,
)
from ingest.regressions import (
    DEFAULT_THRESHOLD_PERCENT,
    DEFAULT_WINDOW,
    MIN_BASELINE_POINTS,
    Settings,
)

router = APIRouter(tags=["history"], dependencies=[Revalidate])

ThresholdPercent = Annotated[float, Query(gt=0, le=1000, description="minimum change, percent")]
Window = Annotated[int, Query(ge=MIN_BASELINE_POINTS, le=1000,
                              description="earlier points in the baseline")]


@router.get("/reports/{report_id}/regressions", operation_id="list_regressions",
            responses={**READ, **errors(404)})
def regressions(
    report_id: ReportId, _read: ReadAccess, session: SessionDep,
    threshold: ThresholdPercent = DEFAULT_THRESHOLD_PERCENT, window: Window = DEFAULT_WINDOW,
) -> ReportRegressions:
    """Cases of the report whose layer time moved past the threshold and past the noise of
    their series (``counts`` says how many were unchanged or had too little history), each
    with its ``attribution`` (the phase that moved most against the baseline's median
    phases, GPU-state changes), and the flagged cases grouped by shared dimensions."""
    settings = Settings(threshold_percent=threshold, window=window)
    result = report_regressions(session, report_id, settings)
    return report_regressions_out(result, explain(session, result))


@router.get("/history", operation_id="get_history", responses={**READ, **errors(404)})
def history(
    _read: ReadAccess, session: SessionDep,
    caseId: Annotated[Text, StringConstraints(max_length=300), Query()],  # noqa: N803
    gpu: Annotated[Text, StringConstraints(max_length=200), Query()],
    series: Annotated[Text | None, StringConstraints(max_length=16), Query(
        description="one of the GPU's shapes (default: the most recently measured)")] = None,
    since: Annotated[date | None, Query(description="reports dated on or after (YYYY-MM-DD)")
                     ] = None,
    until: Annotated[date | None, Query(description="reports dated on or before")] = None,
    points: Annotated[int, Query(ge=MIN_HISTORY_ENTRIES, le=MAX_POINTS, description=(
        "most entries answered: past it, the newest half are points and the older "
        "reports of the range are summarised in buckets"))] = DEFAULT_MAX_POINTS,
) -> HistoryOut:
    """A case's reports on one GPU and shape in a date range, oldest first: the newest in
    full, each judged against the points before it (steps and outliers honoured), the
    older summarised; the marks and where the provenance changed."""
    if since is not None and until is not None and since > until:
        raise RequestValidationError([{"loc": ("query", "since"), "type": "value_error",
                                       "msg": "must be on or before until"}])
    return history_out(case_history(session, caseId, gpu, series, since=since, until=until,
                                    max_points=points))
