"""Queries that pick reports to compare: a report's previous report in its series, and the
earlier measurements of some cases (their phases and GPU state) for attribution."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from app import report_body
from app.case_fields import FIELDS
from app.models import CaseRow, ReportRow
from app.repository import cases as cases_repo
from app.repository.cases import column
from app.repository.history import (
    HISTORY_ORDER,
    baseline_of,
    earlier_in_baseline,
    report_position,
)


def previous_report(session: Session, report_id: int) -> int | None:
    """The report just before this one in its series' history order, if any."""
    position = report_position(session, report_id)
    found = session.execute(
        select(ReportRow.id)
        .where(ReportRow.series == position.series,
               tuple_(*HISTORY_ORDER)
               < tuple_(position.date, position.created_at, position.report_id))
        .order_by(*[column.desc() for column in HISTORY_ORDER]).limit(1)
    ).scalar_one_or_none()
    return None if found is None else int(found)


def previous_reports(session: Session, report_ids: Collection[int]) -> dict[int, int]:
    """``previous_report`` of each of a page's reports (those that have one), in one query:
    each report's predecessor in its series (LAG over the series in history order, which
    the (series, date, created_at, id) index gives in order)."""
    if not report_ids:
        return {}
    lagged = select(ReportRow.id.label("id"), func.lag(ReportRow.id).over(
        partition_by=ReportRow.series, order_by=HISTORY_ORDER).label("previous")).subquery()
    rows = session.execute(
        select(lagged.c.id, lagged.c.previous)
        .where(lagged.c.id.in_(list(report_ids)), lagged.c.previous.is_not(None))
    ).all()
    return {int(report_id): int(previous) for report_id, previous in rows}


def earlier_payloads(session: Session, report_id: int, case_ids: Collection[str],
                     reports: int) -> dict[str, list[dict[str, Any]]]:
    """For each of ``case_ids``, the case as posted in the last ``reports`` earlier reports
    of the report's baseline (after the last step marked at or before it, no outlier: the
    reports its verdict's median is taken over), oldest first."""
    if not case_ids:
        return {}
    position = report_position(session, report_id)
    baseline = baseline_of(session, position)
    recent = (select(ReportRow.id).where(*earlier_in_baseline(position, baseline))
              .order_by(*[column.desc() for column in HISTORY_ORDER]).limit(reports)
              .scalar_subquery())
    # Cases are stored once, in their report's body: decode each recent report's body once.
    wanted = set(case_ids)
    bodies = session.execute(
        select(ReportRow.body).where(ReportRow.id.in_(recent)).order_by(*HISTORY_ORDER)
    ).scalars().all()
    found: dict[str, list[dict[str, Any]]] = {}
    for body in bodies:
        for case in report_body.document(bytes(body))["cases"]:
            if case["id"] in wanted:
                found.setdefault(case["id"], []).append(case)
    return found


def case_payloads(session: Session, report_id: int,
                  case_ids: Collection[str]) -> dict[str, dict[str, Any]]:
    """Some cases of one report, as posted."""
    if not case_ids:
        return {}
    wanted = set(case_ids)
    return {case_id: case for case_id, case in cases_repo.case_payloads(session, report_id).items()
            if case_id in wanted}


def case_dimensions(session: Session, report_id: int) -> list[dict[str, Any]]:
    """Every case of the report by its configuration fields only (id, mode, ep, precision,
    pipeline, category, F, imbalance), read from their columns: what grouping needs, without
    decoding each case's JSON."""
    fields = [f for f in FIELDS if f.wire == "id" or f.filterable]
    rows = session.execute(
        select(*[column(f) for f in fields]).where(CaseRow.report_id == report_id)
        .order_by(CaseRow.position)
    ).all()
    return [dict(zip([f.wire for f in fields], row, strict=True)) for row in rows]
