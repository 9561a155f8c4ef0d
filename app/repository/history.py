"""All queries on series: one case id across the reports of one series (``ingest.series``),
in history order (the report's date, then its ingestion time, then its id)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, Select, func, select, tuple_
from sqlalchemy.orm import Session

from app.models import CaseRow, ReportRow
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


def _earlier(position: SeriesPosition) -> list[ColumnElement[bool]]:
    """The reports of the position's series that come before it in history order."""
    return [ReportRow.series == position.series,
            tuple_(*HISTORY_ORDER)
            < tuple_(position.date, position.created_at, position.report_id)]


def points_in_recent_reports(
    session: Session, position: SeriesPosition, reports: int
) -> dict[str, list[Point]]:
    """For each case of the report, its points in the last ``reports`` earlier reports of
    the series, oldest first. Reads at most ``reports`` x the report's cases rows however
    long the history: when a matrix runs whole every time, these are each case's last
    ``reports`` points."""
    recent = (select(ReportRow.id).where(*_earlier(position))
              .order_by(*[column.desc() for column in HISTORY_ORDER]).limit(reports)
              .scalar_subquery())
    rows = session.execute(
        select(CaseRow.case_id, CaseRow.layer_ms, CaseRow.window_spread_percent)
        .join(ReportRow, ReportRow.id == CaseRow.report_id)
        .where(ReportRow.id.in_(recent), CaseRow.case_id.in_(_cases_of(position)))
        .order_by(*HISTORY_ORDER)
    ).all()
    return _by_case(rows)


def earlier_points(
    session: Session, position: SeriesPosition, window: int,
    case_ids: Collection[str] | None = None,
) -> dict[str, list[Point]]:
    """For each case of the report (or only ``case_ids``), the last ``window`` points of
    its series before the report, oldest first, wherever they lie in the history: the
    database ranks each case's points newest first and keeps ``window`` of them."""
    newest_first = [column.desc() for column in HISTORY_ORDER]
    rank = func.row_number().over(partition_by=CaseRow.case_id, order_by=newest_first)
    which = _cases_of(position) if case_ids is None else list(case_ids)
    ranked = (
        select(CaseRow.case_id, CaseRow.layer_ms, CaseRow.window_spread_percent,
               rank.label("rank"))
        .join(ReportRow, ReportRow.id == CaseRow.report_id)
        .where(*_earlier(position), CaseRow.case_id.in_(which))
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
    layer_ms: float
    window_min_ms: float | None
    window_max_ms: float | None
    window_spread_percent: float | None
    useful_tf_per_gpu: float
    percent_of_peak: float | None


def series_points(session: Session, series: str, case_id: str) -> list[HistoryPoint]:
    """Every point of one case's series, oldest first."""
    rows = session.execute(
        select(ReportRow.id, ReportRow.date, ReportRow.created_at, CaseRow.layer_ms,
               CaseRow.windows, CaseRow.window_spread_percent, CaseRow.useful_tf_per_gpu,
               CaseRow.percent_of_peak)
        .join(CaseRow, CaseRow.report_id == ReportRow.id)
        .where(ReportRow.series == series, CaseRow.case_id == case_id)
        .order_by(*HISTORY_ORDER)
    ).all()
    return [
        HistoryPoint(report_id, date, created_at, layer_ms, *_window_range(windows),
                     spread, useful, percent)
        for report_id, date, created_at, layer_ms, windows, spread, useful, percent in rows
    ]


def _window_range(windows: dict[str, Any]) -> tuple[float | None, float | None]:
    combined = windows.get("combined") or []
    return (min(combined), max(combined)) if combined else (None, None)


def series_of_case(session: Session, case_id: str, gpu: str) -> list[str]:
    """The series holding this case on this GPU (one per shape), the most recent first."""
    rows = session.execute(
        select(ReportRow.series, func.max(ReportRow.date).label("latest"))
        .join(CaseRow, CaseRow.report_id == ReportRow.id)
        .where(ReportRow.gpu == gpu, CaseRow.case_id == case_id)
        .group_by(ReportRow.series).order_by(func.max(ReportRow.date).desc(), ReportRow.series)
    ).all()
    return [series for series, _ in rows]


def series_meta(session: Session, series: str) -> dict[str, Any] | None:
    """The meta of the series' newest report (what its identity was computed from)."""
    return session.execute(
        select(ReportRow.meta).where(ReportRow.series == series)
        .order_by(*[column.desc() for column in HISTORY_ORDER]).limit(1)
    ).scalar_one_or_none()
