"""What the history and regressions endpoints (and ``moescope regressions --json``) return."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.api.params import no_nul
from app.repository.history import Mark
from app.services.history import (
    CaseHistory,
    CaseVerdict,
    ReportVerdicts,
    change_dict,
    history_path,
    mark_dict,
    point_dict,
)
from ingest.regressions import Status


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Regression(Out):
    caseId: str
    kind: Literal["regression", "improvement"]
    metric: str
    changePercent: float
    baseline: float
    baselinePoints: int
    noisePercent: float
    historyUrl: str


class ReportRegressions(Out):
    reportId: int
    thresholdPercent: float
    window: int
    items: list[Regression]
    # How many of the report's cases got each verdict, flagged or not.
    counts: dict[Status, int]


def regression_out(item: CaseVerdict, gpu: str, series: str) -> Regression:
    v = item.verdict
    assert v.status in ("regression", "improvement")
    assert v.change_percent is not None and v.baseline is not None
    assert v.noise_percent is not None
    return Regression(
        caseId=item.case_id, kind=v.status, metric=v.metric, changePercent=v.change_percent,
        baseline=v.baseline, baselinePoints=v.baseline_points, noisePercent=v.noise_percent,
        historyUrl=history_path(item.case_id, gpu, series),
    )


def report_regressions_out(result: ReportVerdicts) -> ReportRegressions:
    counts: dict[Status, int] = dict.fromkeys(
        ("regression", "improvement", "unchanged", "insufficient_history"), 0)
    for item in result.items:
        counts[item.verdict.status] += 1
    return ReportRegressions(
        reportId=result.report_id, thresholdPercent=result.settings.threshold_percent,
        window=result.settings.window,
        items=[regression_out(i, result.gpu, result.series) for i in result.flagged],
        counts=counts,
    )


class HistoryPointOut(Out):
    reportId: int
    date: str
    ingestedAt: datetime
    layerMS: float
    windowMinMS: float | None
    windowMaxMS: float | None
    windowSpreadPercent: float | None
    usefulTFPerGPU: float
    percentOfPeak: float | None
    nvlinkTXGBps: float | None
    nvlinkRXGBps: float | None
    # phaseMS (null where the runner timed no phases); not summarised in buckets.
    dispatchMS: float | None
    expertsMS: float | None
    combineMS: float | None
    # The point judged against the points before it, as when it was new.
    status: Status
    changePercent: float | None
    baseline: float | None
    baselinePoints: int
    noisePercent: float | None
    # The admin's marks on this report: "step", "outlier".
    marks: list[Literal["step", "outlier"]]


class Summary(Out):
    mean: float
    min: float
    max: float


class BucketOut(Out):
    """Consecutive older reports of the range, summarised per metric (null: unmeasured)."""

    dateFrom: str
    dateTo: str
    reports: int
    layerMS: Summary | None
    usefulTFPerGPU: Summary | None
    percentOfPeak: Summary | None
    nvlinkTXGBps: Summary | None
    nvlinkRXGBps: Summary | None


class MarkIn(Out):
    # no_nul: Postgres refuses NUL in text (a 500, not the 422 it is).
    reason: Annotated[str, AfterValidator(no_nul)] = Field(
        min_length=1, max_length=2000, description="why, for the history")


class MarkOut(Out):
    reportId: int
    date: str
    kind: Literal["step", "outlier"]
    reason: str
    createdBy: str
    createdAt: datetime


def mark_out(mark: Mark) -> MarkOut:
    return MarkOut(**mark_dict(mark))


class ProvenanceChangeOut(Out):
    reportId: int
    date: str
    changes: list[str]


class HistoryOut(Out):
    caseId: str
    series: str
    seriesFields: dict[str, Any]
    otherSeries: list[str]
    # Reports of the range holding the case; points + buckets cover them all.
    total: int
    # The newest reports of the range in full, each judged, oldest first.
    points: list[HistoryPointOut]
    # The range's older reports summarised, oldest first (empty when every one is a point).
    buckets: list[BucketOut]
    marks: list[MarkOut]
    provenanceChanges: list[ProvenanceChangeOut]


def history_out(history: CaseHistory) -> HistoryOut:
    return HistoryOut(
        caseId=history.case_id, series=history.series, seriesFields=history.fields,
        otherSeries=history.other_series, total=history.total,
        points=[HistoryPointOut(**point_dict(p)) for p in history.points],
        buckets=[BucketOut(**b.as_dict()) for b in history.buckets],
        marks=[mark_out(m) for m in history.marks],
        provenanceChanges=[ProvenanceChangeOut(**change_dict(c))
                           for c in history.provenance_changes],
    )
