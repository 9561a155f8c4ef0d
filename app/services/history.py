"""History and regressions: the series queries joined to the verdicts of
``ingest.regressions``. Called by the API, the CLI and the dashboard alike."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any
from urllib.parse import urlencode

from sqlalchemy.orm import Session

from app.core.errors import NotFound
from app.metrics import HISTORY
from app.repository import history as history_repo
from app.repository import marks as marks_repo
from ingest import provenance
from ingest.regressions import Point, Settings, Verdict, judge, judge_series
from ingest.series import series_fields

# A history answers at most this many entries by default: the newest half of them as
# points, the older reports in the range summarised in as many buckets.
DEFAULT_MAX_POINTS = 200
MAX_POINTS = 5000
MIN_HISTORY_ENTRIES = 10

# The metrics a history can draw (app.metrics.HISTORY): its name in a history -> label.
METRICS = {m.series: m.label for m in HISTORY if m.series}


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
    """The verdict on every case of the report against its series' earlier points (after
    the last step marked at or before it, outliers left out)."""
    settings = settings or Settings()
    position = history_repo.report_position(session, report_id)
    baseline = history_repo.baseline_of(session, position)
    newest = history_repo.report_points(session, report_id)
    # Most cases have their whole window in the last `window` reports; only the others
    # (new cases, cases a smaller matrix left out) need their longer history ranked, and
    # of those only the ones measured before at all (a new case has nothing to rank).
    earlier = history_repo.points_in_recent_reports(session, position, baseline,
                                                    settings.window)
    short = [c for c in newest if len(earlier.get(c, [])) < settings.window]
    if short:
        known = history_repo.cases_with_history(session, position, baseline, short)
        if known:
            earlier.update(history_repo.earlier_points(session, position, baseline,
                                                       settings.window, known))
    return ReportVerdicts(
        report_id, position.gpu, position.series, settings,
        [CaseVerdict(case_id, judge(earlier.get(case_id, []), point, settings))
         for case_id, point in newest.items()],
    )


@dataclass(frozen=True)
class JudgedPoint:
    point: history_repo.HistoryPoint
    verdict: Verdict
    marks: tuple[str, ...] = ()  # "step", "outlier"


@dataclass(frozen=True)
class Bucket:
    """Consecutive older reports summarised: each metric's mean, min and max."""

    row: history_repo.BucketRow

    def as_dict(self) -> dict[str, Any]:
        r = self.row
        return {"dateFrom": r.date_from, "dateTo": r.date_to, "reports": r.reports,
                **{name: None if v is None else {"mean": v[0], "min": v[1], "max": v[2]}
                   for name, v in r.metrics.items()}}


@dataclass(frozen=True)
class ProvenanceChange:
    """A report whose provenance differs from the series' report before it."""

    report_id: int
    date: str
    changes: list[str]  # "driver 580.95 -> 580.159"


@dataclass(frozen=True)
class CaseHistory:
    case_id: str
    series: str
    fields: dict[str, Any]
    # The newest points of the range, judged, oldest first.
    points: list[JudgedPoint]
    # The range's older points summarised, oldest first (empty when all fit).
    buckets: list[Bucket]
    # How many reports of the range hold the case.
    total: int
    marks: list[marks_repo.Mark]
    provenance_changes: list[ProvenanceChange]
    # Other series of this case on this GPU (other shapes), the most recent first.
    other_series: list[str]
    # What the points were judged with (the chart's unflagged band uses its threshold).
    settings: Settings = Settings()


def case_history(
    session: Session, case_id: str, gpu: str, series: str | None = None,
    settings: Settings | None = None, *, since: date | None = None, until: date | None = None,
    max_points: int = DEFAULT_MAX_POINTS,
) -> CaseHistory:
    """A case's series on a GPU, reports dated from ``since`` to ``until`` (inclusive):
    at most ``max_points`` entries, the newest points in full, each judged against the
    points before it (which may lie before the range), the older ones in buckets. Without
    ``series``, the GPU's most recently measured shape.

    What is read does not grow with the history: the newest points and the baseline
    before them, the buckets as the database sums them up, the few reports where the
    provenance changed."""
    settings = settings or Settings()
    found = history_repo.series_of_case(session, case_id, gpu)
    if series is None:
        if not found:
            raise NotFound(f"no report on GPU {gpu!r} holds case {case_id!r}")
        series = found[0]
    elif series not in found:
        raise NotFound(f"series {series!r} on GPU {gpu!r} holds no case {case_id!r}")
    meta = history_repo.series_meta(session, series)
    start = None if since is None else since.isoformat()
    end = None if until is None else (until + timedelta(days=1)).isoformat()
    total = history_repo.count_points(session, series, case_id, start, end)
    full = total if total <= max_points else max_points // 2
    marks = marks_repo.series_marks(session, series)
    outliers_known = sum(m.kind == "outlier" for m in marks)
    # The full points and, before them, enough for the first one's baseline: `window`
    # points besides any outlier among them.
    fetched = history_repo.newest_points(session, series, case_id,
                                         full + settings.window + outliers_known, end)
    first_full = len(fetched) - full
    index = {p.report_id: i for i, p in enumerate(fetched)}
    steps = {index[m.report_id] for m in marks if m.kind == "step" and m.report_id in index}
    outliers = {index[m.report_id] for m in marks
                if m.kind == "outlier" and m.report_id in index}
    kinds: dict[int, tuple[str, ...]] = {}
    for m in marks:
        kinds[m.report_id] = (*kinds.get(m.report_id, ()), m.kind)
    verdicts = judge_series([Point(p.layer_ms, p.window_spread_percent) for p in fetched],
                            settings, steps=steps, outliers=outliers, first=first_full)
    older = total - full
    return CaseHistory(
        case_id=case_id,
        series=series,
        fields=series_fields(meta) if meta is not None else {},
        points=[JudgedPoint(p, v, kinds.get(p.report_id, ()))
                for p, v in zip(fetched[first_full:], verdicts, strict=True)],
        buckets=[Bucket(row) for row in history_repo.buckets(
            session, series, case_id, older, max_points - full, start, end)] if older else [],
        total=total,
        marks=[m for m in marks if (start is None or m.date >= start)
               and (end is None or m.date < end)],
        provenance_changes=_provenance_changes(session, series, start, end),
        other_series=[s for s in found if s != series],
        settings=settings,
    )


def _provenance_changes(session: Session, series: str, start: str | None,
                        end: str | None) -> list[ProvenanceChange]:
    """Each report of the range whose provenance differs from the report before it, named;
    only those reports' metas are read."""
    steps = history_repo.provenance_steps(session, series, start, end)
    metas = history_repo.report_metas(
        session, {rid for s in steps for rid in (s.report_id, s.previous_report_id)})
    return [ProvenanceChange(s.report_id, s.date,
                             provenance.changes(metas[s.previous_report_id],
                                                metas[s.report_id]))
            for s in steps]


def point_dict(judged: JudgedPoint) -> dict[str, Any]:
    """A judged point as plain data (the API's field names): what the history endpoint
    returns and what the history charts and table draw."""
    p, v = judged.point, judged.verdict
    return {
        "reportId": p.report_id, "date": p.date, "ingestedAt": p.created_at,
        "layerMS": p.layer_ms, "windowMinMS": p.window_min_ms, "windowMaxMS": p.window_max_ms,
        "windowSpreadPercent": p.window_spread_percent, "usefulTFPerGPU": p.useful_tf_per_gpu,
        "percentOfPeak": p.percent_of_peak, "nvlinkTXGBps": p.nvlink_tx_gbps,
        "nvlinkRXGBps": p.nvlink_rx_gbps, "dispatchMS": p.dispatch_ms,
        "expertsMS": p.experts_ms, "combineMS": p.combine_ms, "status": v.status,
        "changePercent": v.change_percent, "baseline": v.baseline,
        "baselinePoints": v.baseline_points, "noisePercent": v.noise_percent,
        "marks": list(judged.marks),
    }


def mark_dict(mark: marks_repo.Mark) -> dict[str, Any]:
    return {"reportId": mark.report_id, "date": mark.date, "kind": mark.kind,
            "reason": mark.reason, "createdBy": mark.created_by, "createdAt": mark.created_at}


def change_dict(change: ProvenanceChange) -> dict[str, Any]:
    return {"reportId": change.report_id, "date": change.date, "changes": change.changes}


def history_path(case_id: str, gpu: str, series: str) -> str:
    """The dashboard's history page of one case's series."""
    return "/history?" + urlencode({"caseId": case_id, "gpu": gpu, "series": series})
