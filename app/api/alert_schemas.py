"""What the alerts endpoints return (and take): an alert is one change in one report across
every case it moved (DESIGN.md "Alerts")."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.api.params import no_nul
from app.services.alert_list import Alert
from app.services.alerts import alert_document
from app.services.marks import REASON_MAX_CHARS

AlertStateName = Literal["new", "acknowledged", "invalid", "fixed"]


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AlertCaseOut(Out):
    caseId: str
    changePercent: float = Field(description="layer time, percent of the level before")
    phaseChangePercent: float | None = Field(description="the alert's phase, percent")


class AlertOut(Out):
    """``why`` tells the change in one sentence: the cases, their change, the phase, what
    else moved, the provenance or GPU state change it coincides with, last good and first
    bad report."""

    id: int
    state: AlertStateName
    createdAt: datetime
    updatedAt: datetime
    reportId: int = Field(description="the report whose ingest opened it")
    gpu: str
    series: str
    metric: str
    direction: Literal["regression", "improvement"]
    phase: str | None = Field(description="the phase that moved most in every case")
    changeMinPercent: float
    changeMaxPercent: float
    phaseMinPercent: float | None
    phaseMaxPercent: float | None
    gpuStateChanges: list[str]
    provenanceChanges: list[str]
    lastGoodReportId: int | None
    firstBadReportId: int
    why: str
    cases: list[AlertCaseOut]


class AlertEventOut(Out):
    fromState: AlertStateName
    toState: AlertStateName
    reason: str
    createdBy: str = Field(description="the admin token's name")
    createdAt: datetime


class DeliveryOut(Out):
    url: str
    attempt: int
    statusCode: int | None
    error: str | None
    createdAt: datetime


class AlertDetailOut(AlertOut):
    events: list[AlertEventOut] = Field(description="its triage, oldest first")
    deliveries: list[DeliveryOut] = Field(description="each webhook attempt, oldest first")


class AlertPage(Out):
    items: list[AlertOut]
    total: int
    limit: int
    offset: int


class AlertStateIn(Out):
    state: AlertStateName
    # no_nul: Postgres refuses NUL in text (a 500, not the 422 it is).
    reason: Annotated[str, AfterValidator(no_nul)] = Field(
        min_length=1, max_length=REASON_MAX_CHARS, description="why, for the alert's log")


def alert_out(alert: Alert) -> AlertOut:
    return AlertOut.model_validate(alert_document(alert))


def alert_detail_out(alert: Alert) -> AlertDetailOut:
    return AlertDetailOut.model_validate({
        **alert_document(alert),
        "events": [{"fromState": e.from_state, "toState": e.to_state, "reason": e.reason,
                    "createdBy": e.created_by, "createdAt": e.created_at}
                   for e in alert.events],
        "deliveries": [{"url": d.url, "attempt": d.attempt, "statusCode": d.status_code,
                        "error": d.error, "createdAt": d.created_at}
                       for d in alert.deliveries],
    })
