"""What the history and regressions endpoints (and ``moescope regressions --json``) return."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from app.api.enums import RegressionKind, Verdict
from app.api.params import no_nul
from app.services.explain import Explanation
from app.services.history import (
    CaseHistory,
    CaseVerdict,
    ReportVerdicts,
    change_dict,
    history_path,
    mark_dict,
    point_dict,
)
from app.services.marks import REASON_MAX_CHARS, Mark
from ingest.attribution import Attribution
from ingest.grouping import Group
from ingest.regressions import Status


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PhaseChangeOut(Out):
    phase: str
    baseMS: float
    headMS: float
    changePercent: float


class AttributionOut(Out):
    """Why the case moved: its phases against its baseline's median phases (the one that
    moved most in ms first) and GPU-state changes, in words in ``text``."""

    text: str
    topPhase: str | None
    phases: list[PhaseChangeOut]
    gpuState: list[str]


class GroupOut(Out):
    """Flagged cases that share dimensions: ``text`` is '9 inference nvfp4 mega cases:
    +15.0 % to +19.0 % (regression)'."""

    status: RegressionKind
    label: str
    shared: dict[str, Any]
    caseIds: list[str]
    lowPercent: float
    highPercent: float
    ofTotal: int | None
    text: str


class Regression(Out):
    caseId: str
    kind: RegressionKind
    metric: str
    changePercent: float
    baseline: float
    baselinePoints: int
    noisePercent: float
    historyUrl: str
    attribution: AttributionOut | None = None


# How many of the report's cases got each verdict, flagged or not: one count per verdict.
VerdictCounts = create_model(  # type: ignore[call-overload]
    "VerdictCounts", __config__=ConfigDict(extra="forbid"),
    **{v.value: (int, ...) for v in Verdict},
)


class ReportRegressions(Out):
    reportId: int
    thresholdPercent: float
    window: int
    items: list[Regression]
    counts: VerdictCounts
    groups: list[GroupOut] = []
    # The series' report before this one (compare's default base), if any.
    previousReportId: int | None = None


def group_out(group: Group) -> GroupOut:
    assert group.status in ("regression", "improvement")
    return GroupOut(status=group.status, label=group.label, shared=group.shared,
                    caseIds=group.case_ids, lowPercent=group.low_percent,
                    highPercent=group.high_percent, ofTotal=group.of_total, text=group.text())


def regression_out(item: CaseVerdict, gpu: str, series: str,
                   attribution: Attribution | None = None) -> Regression:
    v = item.verdict
    assert v.status in ("regression", "improvement")
    assert v.change_percent is not None and v.baseline is not None
    assert v.noise_percent is not None
    return Regression(
        caseId=item.case_id, kind=RegressionKind(v.status), metric=v.metric,
        changePercent=v.change_percent,
        baseline=v.baseline, baselinePoints=v.baseline_points, noisePercent=v.noise_percent,
        historyUrl=history_path(item.case_id, gpu, series),
        attribution=None if attribution is None else AttributionOut.model_validate(
            attribution.as_dict()),
    )


def report_regressions_out(result: ReportVerdicts,
                           explanation: Explanation | None = None) -> ReportRegressions:
    counts: dict[Status, int] = dict.fromkeys(
        ("regression", "improvement", "unchanged", "insufficient_history"), 0)
    for item in result.items:
        counts[item.verdict.status] += 1
    return ReportRegressions(
        reportId=result.report_id, thresholdPercent=result.settings.threshold_percent,
        window=result.settings.window,
        items=[regression_out(i, result.gpu, result.series,
                              explanation.attributions.get(i.case_id) if explanation else None)
               for i in result.flagged],
        counts=VerdictCounts(**counts),
        groups=[group_out(g) for g in explanation.groups] if explanation else [],
        previousReportId=explanation.previous_report_id if explanation else None,
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
    # phaseMS (null where the runner timed no phases).
    dispatchMS: float | None
    expertsMS: float | None
    combineMS: float | None
    # The point judged against the points before it, as when it was new.
    status: Verdict
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
    dispatchMS: Summary | None
    expertsMS: Summary | None
    combineMS: Summary | None


class MarkIn(Out):
    # no_nul: Postgres refuses NUL in text (a 500, not the 422 it is).
    reason: Annotated[str, AfterValidator(no_nul)] = Field(
        min_length=1, max_length=REASON_MAX_CHARS, description="why, for the history")


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
