"""All queries on series: one case id across the reports of one series (``ingest.series``),
in history order (the report's date, then its ingestion time, then its id), (the marks an
admin puts on a series' reports are app.repository.marks)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, Select, exists, func, select, tuple_
from sqlalchemy.orm import Session

from app import case_fields
from app.models import CaseRow, MarkRow, ReportRow
from app.repository.reports import report_columns
from ingest.regressions import Point

HISTORY_ORDER = (ReportRow.date, ReportRow.created_at, ReportRow.id)


@dataclass(frozen=True)
class SeriesPosition:
    """Where a report sits: its series and its place in history order."""

    report_id: int
    gpu: str
    series: str
    date: str
    created_at: datetime


def report_position(session: Session, report_id: int) -> SeriesPosition:
    row = report_columns(session, report_id, ReportRow.gpu, ReportRow.series, ReportRow.date,
                         ReportRow.created_at)
    return SeriesPosition(report_id, *row)


def report_points(session: Session, report_id: int) -> dict[str, Point]:
    """Each case of the report as a point of its series, in report order."""
    rows = session.execute(
        select(CaseRow.case_id, CaseRow.layer_ms, CaseRow.window_spread_percent)
        .where(CaseRow.report_id == report_id).order_by(CaseRow.position)
    ).all()
    return {case_id: Point(layer_ms, spread) for case_id, layer_ms, spread in rows}


@dataclass(frozen=True)
class Baseline:
    """Which earlier reports of a series may be a report's baseline: those after the last
    step marked at or before it (``since``: that step's place in history order), none of
    the outliers."""

    since: tuple[str, datetime, int] | None
    outliers: list[int]


def baseline_of(session: Session, position: SeriesPosition) -> Baseline:
    rows = session.execute(
        select(MarkRow.kind, ReportRow.date, ReportRow.created_at, ReportRow.id)
        .join(ReportRow, ReportRow.id == MarkRow.report_id)
        .where(ReportRow.series == position.series)
    ).all()
    here = (position.date, position.created_at, position.report_id)
    steps = [(date, created, rid) for kind, date, created, rid in rows
             if kind == "step" and (date, created, rid) <= here]
    return Baseline(max(steps) if steps else None,
                    [rid for kind, *_, rid in rows if kind == "outlier"])


def earlier_in_baseline(position: SeriesPosition,
                        baseline: Baseline) -> list[ColumnElement[bool]]:
    """The reports of the position's series that come before it in history order and may
    be in its baseline."""
    where = [ReportRow.series == position.series,
             tuple_(*HISTORY_ORDER)
             < tuple_(position.date, position.created_at, position.report_id)]
    if baseline.since is not None:
        where.append(tuple_(*HISTORY_ORDER) >= tuple_(*baseline.since))
    if baseline.outliers:
        where.append(ReportRow.id.not_in(baseline.outliers))
    return where


def points_in_recent_reports(
    session: Session, position: SeriesPosition, baseline: Baseline, reports: int
) -> dict[str, list[Point]]:
    """For each case of the report, its points in the last ``reports`` earlier reports of
    its baseline, oldest first. Reads at most ``reports`` x the report's cases rows however
    long the history: when a matrix runs whole every time, these are each case's last
    ``reports`` points."""
    recent = (select(ReportRow.id).where(*earlier_in_baseline(position, baseline))
              .order_by(*[column.desc() for column in HISTORY_ORDER]).limit(reports)
              .scalar_subquery())
    rows = session.execute(
        select(CaseRow.case_id, CaseRow.layer_ms, CaseRow.window_spread_percent)
        .join(ReportRow, ReportRow.id == CaseRow.report_id)
        .where(ReportRow.id.in_(recent), CaseRow.case_id.in_(_cases_of(position)))
        .order_by(*HISTORY_ORDER)
    ).all()
    return _by_case(rows)


def cases_with_history(
    session: Session, position: SeriesPosition, baseline: Baseline, case_ids: Collection[str]
) -> list[str]:
    """Those of ``case_ids`` measured in at least one report of the baseline. Through the
    case-id index: a case new to its series costs one index probe, not a scan of it."""
    earlier = (select(ReportRow.id).where(*earlier_in_baseline(position, baseline),
                                          ReportRow.id == CaseRow.report_id))
    return list(session.execute(
        select(CaseRow.case_id).where(CaseRow.case_id.in_(list(case_ids)), exists(earlier))
        .distinct()
    ).scalars().all())


def earlier_points(
    session: Session, position: SeriesPosition, baseline: Baseline, window: int,
    case_ids: Collection[str],
) -> dict[str, list[Point]]:
    """For each of ``case_ids``, the last ``window`` points of its baseline before the
    report, oldest first, wherever they lie in the history: the database ranks each case's
    points newest first and keeps ``window`` of them."""
    newest_first = [column.desc() for column in HISTORY_ORDER]
    rank = func.row_number().over(partition_by=CaseRow.case_id, order_by=newest_first)
    ranked = (
        select(CaseRow.case_id, CaseRow.layer_ms, CaseRow.window_spread_percent,
               rank.label("rank"))
        .join(ReportRow, ReportRow.id == CaseRow.report_id)
        .where(*earlier_in_baseline(position, baseline), CaseRow.case_id.in_(list(case_ids)))
        .subquery()
    )
    rows = session.execute(
        select(ranked.c.case_id, ranked.c.layer_ms, ranked.c.window_spread_percent)
        .where(ranked.c.rank <= window)
        .order_by(ranked.c.case_id, ranked.c.rank.desc())
    ).all()
    return _by_case(rows)


def _cases_of(position: SeriesPosition) -> Select[str]:
    return select(CaseRow.case_id).where(CaseRow.report_id == position.report_id)


def _by_case(rows: Sequence[Row[Any, Any, Any]]) -> dict[str, list[Point]]:
    points: dict[str, list[Point]] = {}
    for case_id, layer_ms, spread in rows:
        points.setdefault(case_id, []).append(Point(layer_ms, spread))
    return points


@dataclass(frozen=True)
class HistoryPoint:
    report_id: int
    date: str
    created_at: datetime
    provenance: str  # ``ingest.provenance.provenance_key`` of the report's meta
    layer_ms: float
    window_min_ms: float | None
    window_max_ms: float | None
    window_spread_percent: float | None
    useful_tf_per_gpu: float
    percent_of_peak: float | None
    nvlink_tx_gbps: float | None
    nvlink_rx_gbps: float | None
    dispatch_ms: float | None
    experts_ms: float | None
    combine_ms: float | None


def _case_in_series(series: str, case_id: str, since: str | None,
                    until: str | None) -> list[ColumnElement[bool]]:
    where = [ReportRow.series == series, CaseRow.case_id == case_id]
    if since is not None:
        where.append(ReportRow.date >= since)
    if until is not None:
        where.append(ReportRow.date < until)
    return where


def count_points(session: Session, series: str, case_id: str, since: str | None = None,
                 until: str | None = None) -> int:
    """How many reports of the series dated in [since, until) hold the case."""
    return int(session.execute(
        select(func.count()).select_from(CaseRow)
        .join(ReportRow, ReportRow.id == CaseRow.report_id)
        .where(*_case_in_series(series, case_id, since, until))
    ).scalar_one())


def newest_points(session: Session, series: str, case_id: str, count: int,
                  until: str | None = None) -> list[HistoryPoint]:
    """The last ``count`` points of one case's series dated before ``until``, oldest first.
    Walks the series' reports newest first and stops: the cost is ``count``, not the
    length of the history."""
    rows = session.execute(
        select(ReportRow.id, ReportRow.date, ReportRow.created_at, ReportRow.provenance,
               CaseRow.layer_ms, CaseRow.window_min_ms, CaseRow.window_max_ms,
               CaseRow.window_spread_percent, CaseRow.useful_tf_per_gpu,
               CaseRow.percent_of_peak, CaseRow.nvlink_tx_gbps, CaseRow.nvlink_rx_gbps,
               CaseRow.phase_dispatch_ms, CaseRow.phase_experts_ms, CaseRow.phase_combine_ms)
        .join(CaseRow, CaseRow.report_id == ReportRow.id)
        .where(*_case_in_series(series, case_id, None, until))
        .order_by(*[column.desc() for column in HISTORY_ORDER]).limit(count)
    ).all()
    return [HistoryPoint(*tuple(row)) for row in reversed(rows)]


# The metrics a bucket summarises, every one a history can draw: wire name -> column.
BUCKET_METRICS = {"layerMS": CaseRow.layer_ms, "usefulTFPerGPU": CaseRow.useful_tf_per_gpu,
                  "percentOfPeak": CaseRow.percent_of_peak,
                  "nvlinkTXGBps": CaseRow.nvlink_tx_gbps,
                  "nvlinkRXGBps": CaseRow.nvlink_rx_gbps,
                  "dispatchMS": CaseRow.phase_dispatch_ms,
                  "expertsMS": CaseRow.phase_experts_ms,
                  "combineMS": CaseRow.phase_combine_ms}


@dataclass(frozen=True)
class BucketRow:
    date_from: str
    date_to: str
    reports: int
    # metric -> (mean, min, max), None where no report of the bucket measured it
    metrics: dict[str, tuple[float, float, float] | None]


def buckets(session: Session, series: str, case_id: str, oldest: int, count: int,
            since: str | None = None, until: str | None = None) -> list[BucketRow]:
    """The ``oldest`` first points of the case's series dated in [since, until), in ``count``
    runs of consecutive points (as even as they split), each summarised in the database:
    its dates, size, and each metric's mean, min and max. No point leaves the database."""
    ordered = (
        select(ReportRow.date.label("date"),
               *[column.label(name) for name, column in BUCKET_METRICS.items()],
               func.row_number().over(order_by=HISTORY_ORDER).label("n"))
        .join(CaseRow, CaseRow.report_id == ReportRow.id)
        .where(*_case_in_series(series, case_id, since, until))
        .subquery()
    )
    # Integer arithmetic on both databases: n = 1..oldest -> bucket 0..count-1.
    bucket = ((ordered.c.n - 1) * count // oldest).label("bucket")
    summaries = [aggregate(ordered.c[name]) for name in BUCKET_METRICS
                 for aggregate in (func.avg, func.min, func.max)]
    rows = session.execute(
        select(bucket, func.min(ordered.c.date), func.max(ordered.c.date), func.count(),
               *summaries)
        .where(ordered.c.n <= oldest).group_by(bucket).order_by(bucket)
    ).all()
    out = []
    for row in rows:
        values = list(row[4:])
        metrics: dict[str, tuple[float, float, float] | None] = {}
        for i, name in enumerate(BUCKET_METRICS):
            mean, low, high = values[3 * i:3 * i + 3]
            metrics[name] = None if mean is None else (float(mean), low, high)
        out.append(BucketRow(row[1], row[2], int(row[3]), metrics))
    return out


@dataclass(frozen=True)
class ProvenanceStep:
    report_id: int
    date: str
    previous_report_id: int


def provenance_steps(session: Session, series: str, since: str | None = None,
                     until: str | None = None) -> list[ProvenanceStep]:
    """The series' reports dated in [since, until) whose provenance key differs from the
    report before them (that one may be older than ``since``), oldest first."""
    lagged = select(
        ReportRow.id.label("id"), ReportRow.date.label("date"),
        ReportRow.provenance.label("provenance"),
        func.lag(ReportRow.provenance).over(order_by=HISTORY_ORDER).label("before"),
        func.lag(ReportRow.id).over(order_by=HISTORY_ORDER).label("before_id"),
        func.row_number().over(order_by=HISTORY_ORDER).label("n"),
    ).where(ReportRow.series == series)
    if until is not None:
        lagged = lagged.where(ReportRow.date < until)
    sub = lagged.subquery()
    query = (select(sub.c.id, sub.c.date, sub.c.before_id)
             .where(sub.c.before.is_not(None), sub.c.before != sub.c.provenance)
             .order_by(sub.c.n))
    if since is not None:
        query = query.where(sub.c.date >= since)
    return [ProvenanceStep(*tuple(row)) for row in session.execute(query).all()]


def series_of_case(session: Session, case_id: str, gpu: str) -> list[str]:
    """The series holding this case on this GPU (one per shape), the most recently
    measured first. The GPU's series come from an index; each is then probed for the case
    (one index lookup), instead of joining every report of the GPU to its cases."""
    latest = session.execute(
        select(ReportRow.series, func.max(ReportRow.date))
        .where(ReportRow.gpu == gpu).group_by(ReportRow.series)
        .order_by(func.max(ReportRow.date).desc(), ReportRow.series)
    ).all()
    found = []
    for series, _ in latest:
        holds = session.execute(select(exists(
            select(CaseRow.id).join(ReportRow, ReportRow.id == CaseRow.report_id)
            .where(CaseRow.case_id == case_id, ReportRow.series == series)
        ))).scalar_one()
        if holds:
            found.append(series)
    return found


def series_meta(session: Session, series: str) -> dict[str, Any] | None:
    """The meta of the series' newest report (what its identity was computed from)."""
    return session.execute(
        select(ReportRow.meta).where(ReportRow.series == series)
        .order_by(*[column.desc() for column in HISTORY_ORDER]).limit(1)
    ).scalar_one_or_none()


def report_metas(session: Session, report_ids: Collection[int]) -> dict[int, dict[str, Any]]:
    """The meta of a few reports (those where a series' provenance changed)."""
    if not report_ids:
        return {}
    return dict(session.execute(
        select(ReportRow.id, ReportRow.meta).where(ReportRow.id.in_(list(report_ids)))
    ).all())


def same_configuration(session: Session, report_id: int, case_id: str,
                       vary: Collection[str]) -> list[str]:
    """The report's cases whose configuration (the filterable fields) is ``case_id``'s
    except for the fields ``vary`` (e.g. every precision of one configuration), in report
    order, the case itself included."""
    fixed = [f for f in case_fields.FILTERABLE if f.wire not in vary and f.column is not None]
    columns = [getattr(CaseRow, str(f.column)) for f in fixed]
    row = session.execute(select(*columns).where(CaseRow.report_id == report_id,
                                                 CaseRow.case_id == case_id)).one_or_none()
    if row is None:
        return [case_id]
    return list(session.execute(
        select(CaseRow.case_id)
        .where(CaseRow.report_id == report_id,
               *[column == value for column, value in zip(columns, row, strict=True)])
        .order_by(CaseRow.position)
    ).scalars().all())
