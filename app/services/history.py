"""History and regressions: the series queries joined to the verdicts of
``ingest.regressions``. Called by the API, the CLI and the dashboard alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from sqlalchemy.orm import Session

from app.core.errors import NotFound
from app.repository import history as history_repo
from ingest.regressions import Point, Settings, Verdict, judge
from ingest.series import series_fields


@dataclass(frozen=True)
class CaseVerdict:
    case_id: str
    verdict: Verdict


@dataclass(frozen=True)
class ReportVerdicts:
    report_id: int
    gpu: str
    series: str
    settings: Settings
    # Every case of the report, in report order (unflagged and insufficient ones too).
    items: list[CaseVerdict]

    @property
    def flagged(self) -> list[CaseVerdict]:
        return [item for item in self.items if item.verdict.flagged]


def report_regressions(
    session: Session, report_id: int, settings: Settings | None = None
) -> ReportVerdicts:
    """The verdict on every case of the report against its series' earlier points."""
    settings = settings or Settings()
    position = history_repo.report_position(session, report_id)
    newest = history_repo.report_points(session, report_id)
    # Most cases have their whole window in the last `window` reports; only the others
    # (new cases, cases a smaller matrix left out) need their longer history ranked.
    earlier = history_repo.points_in_recent_reports(session, position, settings.window)
    short = [c for c in newest if len(earlier.get(c, [])) < settings.window]
    if short:
        whole = None if len(short) == len(newest) else short
        earlier.update(history_repo.earlier_points(session, position, settings.window, whole))
    return ReportVerdicts(
        report_id, position.gpu, position.series, settings,
        [CaseVerdict(case_id, judge(earlier.get(case_id, []), point, settings))
         for case_id, point in newest.items()],
    )


@dataclass(frozen=True)
class JudgedPoint:
    point: history_repo.HistoryPoint
    verdict: Verdict


@dataclass(frozen=True)
class CaseHistory:
    case_id: str
    series: str
    fields: dict[str, Any]
    points: list[JudgedPoint]
    # Other series of this case on this GPU (other shapes), the most recent first.
    other_series: list[str]


def case_history(
    session: Session, case_id: str, gpu: str, series: str | None = None,
    settings: Settings | None = None,
) -> CaseHistory:
    """A case's series on a GPU, each point judged against the points before it. Without
    ``series``, the GPU's most recently measured shape."""
    found = history_repo.series_of_case(session, case_id, gpu)
    if series is None:
        if not found:
            raise NotFound(f"no report on GPU {gpu!r} holds case {case_id!r}")
        series = found[0]
    elif series not in found:
        raise NotFound(f"series {series!r} on GPU {gpu!r} holds no case {case_id!r}")
    meta = history_repo.series_meta(session, series)
    points = history_repo.series_points(session, series, case_id)
    return CaseHistory(
        case_id=case_id,
        series=series,
        fields=series_fields(meta) if meta is not None else {},
        points=judged(points, settings or Settings()),
        other_series=[s for s in found if s != series],
    )


def judged(points: list[history_repo.HistoryPoint], settings: Settings) -> list[JudgedPoint]:
    """Each point with its verdict against the points before it (as it was when new)."""
    plain = [Point(p.layer_ms, p.window_spread_percent) for p in points]
    return [JudgedPoint(p, judge(plain[:i], plain[i], settings)) for i, p in enumerate(points)]


def point_dict(judged: JudgedPoint) -> dict[str, Any]:
    """A judged point as plain data (the API's field names): what the history endpoint
    returns and what the history charts and table draw."""
    p, v = judged.point, judged.verdict
    return {
        "reportId": p.report_id, "date": p.date, "ingestedAt": p.created_at,
        "layerMS": p.layer_ms, "windowMinMS": p.window_min_ms, "windowMaxMS": p.window_max_ms,
        "windowSpreadPercent": p.window_spread_percent, "usefulTFPerGPU": p.useful_tf_per_gpu,
        "percentOfPeak": p.percent_of_peak, "status": v.status,
        "changePercent": v.change_percent, "baseline": v.baseline,
        "baselinePoints": v.baseline_points, "noisePercent": v.noise_percent,
    }


def history_path(case_id: str, gpu: str, series: str) -> str:
    """The dashboard's history page of one case's series."""
    return "/history?" + urlencode({"caseId": case_id, "gpu": gpu, "series": series})
