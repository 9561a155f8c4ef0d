"""/api/v1/alerts: the alerts ingest opened, newest first; one alert with its triage log
and webhook deliveries; triage (admin scope)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time
from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import BeforeValidator, StringConstraints

from app.api.alert_schemas import (
    AlertDetailOut,
    AlertPage,
    AlertStateIn,
    AlertStateName,
    alert_detail_out,
    alert_out,
)
from app.api.caching import Revalidate
from app.api.deps import AdminToken, ReadAccess
from app.api.params import Text
from app.api.responses import READ, errors
from app.api.sessions import SessionDep, TransactionDep
from app.services import alerts
from ingest.schema import INT64_MAX

router = APIRouter(prefix="/alerts", tags=["alerts"])

AlertId = Annotated[int, Path(ge=1, le=INT64_MAX)]


def _iso_date(value: object) -> object:
    # pydantic reads a number as a Unix time ("since=0" would be 1970-01-01): only the
    # YYYY-MM-DD the schema's format names is a date here.
    if value is not None and not (isinstance(value, str) and ISO_DATE.fullmatch(value)):
        raise ValueError("a date as YYYY-MM-DD")
    return value


ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@router.get("", operation_id="list_alerts", dependencies=[Revalidate], responses=READ)
def list_alerts(
    _read: ReadAccess, session: SessionDep,
    state: Annotated[AlertStateName | None, Query()] = None,
    gpu: Annotated[Text | None, StringConstraints(max_length=200), Query()] = None,
    since: Annotated[date | None, BeforeValidator(_iso_date),
                     Query(description="opened on or after (YYYY-MM-DD, UTC)")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=INT64_MAX)] = 0,
) -> AlertPage:
    """Alerts, newest first: each one change in one report across every case it moved."""
    start = None if since is None else datetime.combine(since, time(), UTC)
    items, total = alerts.list_alerts(session, state=state, gpu=gpu, since=start,
                                      limit=limit, offset=offset)
    return AlertPage(items=[alert_out(a) for a in items], total=total, limit=limit,
                     offset=offset)


@router.get("/{alert_id}", operation_id="get_alert", dependencies=[Revalidate],
            responses={**READ, **errors(404)})
def get_alert(alert_id: AlertId, _read: ReadAccess, session: SessionDep) -> AlertDetailOut:
    return alert_detail_out(alerts.get_alert(session, alert_id))


@router.patch("/{alert_id}", operation_id="triage_alert",
              responses=errors(401, 403, 404, 422, 503))
def triage_alert(alert_id: AlertId, body: AlertStateIn, token: AdminToken,
                 session: TransactionDep) -> AlertDetailOut:
    """Set the alert's state (``invalid``: a false alarm, the record the detector's false
    alarm rate is computed from); who, when and why are logged."""
    return alert_detail_out(alerts.set_state(session, alert_id, body.state, body.reason,
                                             token.name))
