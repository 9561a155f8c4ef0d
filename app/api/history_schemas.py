"""What the history and regressions endpoints (and ``moescope regressions --json``) return."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from app.api.enums import RegressionKind, Verdict
from app.services.history import (
    CaseHistory,
    CaseVerdict,
    ReportVerdicts,
    history_path,
    point_dict,
)
from ingest.regressions import Status


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Regression(Out):
    caseId: str
    kind: RegressionKind
    metric: str
    changePercent: float
    baseline: float
    baselinePoints: int
    noisePercent: float
    historyUrl: str


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


def regression_out(item: CaseVerdict, gpu: str, series: str) -> Regression:
    v = item.verdict
    assert v.status in ("regression", "improvement")
    assert v.change_percent is not None and v.baseline is not None
    assert v.noise_percent is not None
    return Regression(
        caseId=item.case_id, kind=RegressionKind(v.status), metric=v.metric,
        changePercent=v.change_percent,
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
        counts=VerdictCounts(**counts),
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
    # The point judged against the points before it, as when it was new.
    status: Verdict
    changePercent: float | None
    baseline: float | None
    baselinePoints: int
    noisePercent: float | None


class HistoryOut(Out):
    caseId: str
    series: str
    seriesFields: dict[str, Any]
    otherSeries: list[str]
    points: list[HistoryPointOut]


def history_out(history: CaseHistory) -> HistoryOut:
    return HistoryOut(
        caseId=history.case_id, series=history.series, seriesFields=history.fields,
        otherSeries=history.other_series,
        points=[HistoryPointOut(**point_dict(p)) for p in history.points],
    )
