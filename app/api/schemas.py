"""Response schemas: what leaves through the API. Report rows are converted here (case rows
in app.services.cases), never returned."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.case_schema import CaseOut, ReportFacets
from app.models import ReportRow
from ingest.derived import report_notes as notes_of
from ingest.schema import Meta


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReportCreated(Out):
    id: int
    caseCount: int
    created: bool


class CasesAppended(Out):
    id: int
    caseCount: int
    added: int
    unchanged: int


class ReportSummary(Out):
    id: int
    date: str
    gpu: str
    source: str | None
    runId: str | None
    caseCount: int
    bestPercentOfPeak: float | None = Field(
        description="the best % of peak among the cases that are no data error")
    dataErrorCount: int = Field(
        description="cases caveated above_peak, numerical_not_accepted or failed")
    createdAt: datetime
    updatedAt: datetime


class ReportPage(Out):
    items: list[ReportSummary]
    total: int
    limit: int
    offset: int


class Note(Out):
    key: str
    qualifies: str | None
    text: str


class ReportDetail(ReportSummary):
    meta: Meta  # as posted, unknown fields included
    summary: ReportFacets
    caveats: list[Note]


class CasePage(Out):
    items: list[CaseOut]  # type: ignore[valid-type]
    total: int
    limit: int
    offset: int


class Health(Out):
    status: Literal["ok"]


class Readiness(Out):
    status: Literal["ready"]
    revision: str


def report_summary(row: ReportRow) -> ReportSummary:
    return ReportSummary(
        id=row.id,
        date=row.date,
        gpu=row.gpu,
        source=row.source,
        runId=row.run_id,
        caseCount=row.case_count,
        bestPercentOfPeak=row.best_percent_of_peak,
        dataErrorCount=row.data_error_count,
        createdAt=row.created_at,
        updatedAt=row.updated_at,
    )


def report_notes(meta: dict[str, Any]) -> list[Note]:
    return [Note(key=n.key, qualifies=n.qualifies, text=n.text) for n in notes_of(meta)]
