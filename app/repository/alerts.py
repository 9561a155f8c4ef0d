"""All queries on alerts: an alert with its cases, its triage log and its webhook
deliveries; and the series reads detection needs beyond app.repository.history (each
case's tail with the report ids, and which changes already have an alert)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from app.core.errors import NotFound
from app.models import (
    AlertCaseRow,
    AlertEventRow,
    AlertRow,
    CaseRow,
    ReportRow,
    WebhookDeliveryRow,
    utcnow,
)
from app.repository.history import (
    HISTORY_ORDER,
    Baseline,
    SeriesPosition,
    earlier_in_baseline,
)


@dataclass(frozen=True)
class AlertCase:
    case_id: str
    change_percent: float
    phase_change_percent: float | None


@dataclass(frozen=True)
class NewAlert:
    """What detection decided to open (``app.services.alerts``)."""

    report_id: int
    gpu: str
    series: str
    metric: str
    direction: str
    phase: str | None
    change_min_percent: float
    change_max_percent: float
    phase_min_percent: float | None
    phase_max_percent: float | None
    gpu_state_changes: list[str]
    provenance_changes: list[str]
    last_good_report_id: int | None
    first_bad_report_id: int
    why: str
    cases: list[AlertCase]


@dataclass(frozen=True)
class Event:
    from_state: str
    to_state: str
    reason: str
    created_by: str
    created_at: datetime


@dataclass(frozen=True)
class Delivery:
    url: str
    attempt: int
    status_code: int | None
    error: str | None
    created_at: datetime


@dataclass(frozen=True)
class Alert:
    id: int
    state: str
    created_at: datetime
    updated_at: datetime
    opened: NewAlert
    events: list[Event] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)


_OPENED = ("report_id", "gpu", "series", "metric", "direction", "phase", "change_min_percent",
           "change_max_percent", "phase_min_percent", "phase_max_percent",
           "gpu_state_changes", "provenance_changes", "last_good_report_id",
           "first_bad_report_id", "why")


def insert_alert(session: Session, alert: NewAlert) -> int:
    now = utcnow()
    row = AlertRow(**{name: getattr(alert, name) for name in _OPENED}, state="new",
                   created_at=now, updated_at=now)
    session.add(row)
    session.flush()
    session.add_all([AlertCaseRow(alert_id=row.id, case_id=c.case_id,
                                  change_percent=c.change_percent,
                                  phase_change_percent=c.phase_change_percent)
                     for c in alert.cases])
    session.flush()
    return int(row.id)


def _cases_of(session: Session, alert_ids: Collection[int]) -> dict[int, list[AlertCase]]:
    rows = session.execute(
        select(AlertCaseRow.alert_id, AlertCaseRow.case_id, AlertCaseRow.change_percent,
               AlertCaseRow.phase_change_percent)
        .where(AlertCaseRow.alert_id.in_(list(alert_ids))).order_by(AlertCaseRow.id)
    ).all()
    found: dict[int, list[AlertCase]] = {}
    for alert_id, case_id, change, phase_change in rows:
        found.setdefault(alert_id, []).append(AlertCase(case_id, change, phase_change))
    return found


def _alerts(session: Session, rows: Sequence[AlertRow]) -> list[Alert]:
    cases = _cases_of(session, [r.id for r in rows]) if rows else {}
    return [Alert(r.id, r.state, r.created_at, r.updated_at,
                  NewAlert(**{name: getattr(r, name) for name in _OPENED},
                           cases=cases.get(r.id, [])))
            for r in rows]


def list_alerts(session: Session, *, state: str | None = None, gpu: str | None = None,
                since: datetime | None = None, report_ids: Collection[int] | None = None,
                case_id: str | None = None, limit: int = 100, offset: int = 0
                ) -> tuple[list[Alert], int]:
    """Alerts newest first (and their total) matching every filter given: ``report_ids``
    those opened by, or whose first bad report is, one of these reports."""
    query = select(AlertRow)
    if state is not None:
        query = query.where(AlertRow.state == state)
    if gpu is not None:
        query = query.where(AlertRow.gpu == gpu)
    if since is not None:
        query = query.where(AlertRow.created_at >= since)
    if report_ids is not None:
        ids = list(report_ids)
        query = query.where(AlertRow.report_id.in_(ids) | AlertRow.first_bad_report_id.in_(ids))
    if case_id is not None:
        query = query.where(AlertRow.id.in_(
            select(AlertCaseRow.alert_id).where(AlertCaseRow.case_id == case_id)))
    total = int(session.execute(
        select(func.count()).select_from(query.subquery())).scalar_one())
    rows = session.execute(
        query.order_by(AlertRow.created_at.desc(), AlertRow.id.desc())
        .limit(limit).offset(offset)).scalars().all()
    return _alerts(session, rows), total


def get_alert(session: Session, alert_id: int) -> Alert:
    """The alert with its triage log and deliveries; NotFound when there is none."""
    row = session.get(AlertRow, alert_id)
    if row is None:
        raise NotFound(f"no alert {alert_id}")
    alert = _alerts(session, [row])[0]
    events = session.execute(
        select(AlertEventRow.from_state, AlertEventRow.to_state, AlertEventRow.reason,
               AlertEventRow.created_by, AlertEventRow.created_at)
        .where(AlertEventRow.alert_id == alert_id).order_by(AlertEventRow.id)).all()
    deliveries = session.execute(
        select(WebhookDeliveryRow.url, WebhookDeliveryRow.attempt,
               WebhookDeliveryRow.status_code, WebhookDeliveryRow.error,
               WebhookDeliveryRow.created_at)
        .where(WebhookDeliveryRow.alert_id == alert_id).order_by(WebhookDeliveryRow.id)).all()
    return Alert(alert.id, alert.state, alert.created_at, alert.updated_at, alert.opened,
                 [Event(*e) for e in events], [Delivery(*d) for d in deliveries])


def set_state(session: Session, alert_id: int, state: str, reason: str,
              created_by: str) -> None:
    """Move the alert to ``state`` and log who, when, from, to and why."""
    row = session.get(AlertRow, alert_id, with_for_update=True)
    if row is None:
        raise NotFound(f"no alert {alert_id}")
    now = utcnow()
    session.add(AlertEventRow(alert_id=alert_id, from_state=row.state, to_state=state,
                              reason=reason, created_by=created_by, created_at=now))
    row.state = state
    row.updated_at = now
    session.flush()


def log_delivery(session: Session, alert_id: int, url: str, attempt: int,
                 status_code: int | None, error: str | None) -> None:
    session.add(WebhookDeliveryRow(alert_id=alert_id, url=url, attempt=attempt,
                                   status_code=status_code, error=error, created_at=utcnow()))
    session.flush()


@dataclass(frozen=True)
class TailPoint:
    report_id: int
    layer_ms: float
    window_spread_percent: float | None


def tail_points(session: Session, position: SeriesPosition, baseline: Baseline,
                reports: int) -> dict[str, list[TailPoint]]:
    """Each case of the report: its points in the last ``reports`` earlier reports of its
    baseline (app.repository.history.points_in_recent_reports, with their report ids),
    then its point in the report itself; oldest first."""
    # The report ids first: one OR of "recent" and "this report" in the cases query made
    # Postgres scan every case row of the database.
    recent = session.execute(
        select(ReportRow.id).where(*earlier_in_baseline(position, baseline))
        .order_by(*[column.desc() for column in HISTORY_ORDER]).limit(reports)
    ).scalars().all()
    here = select(CaseRow.case_id).where(CaseRow.report_id == position.report_id)
    rows = session.execute(
        select(CaseRow.case_id, ReportRow.id, CaseRow.layer_ms, CaseRow.window_spread_percent)
        .join(ReportRow, ReportRow.id == CaseRow.report_id)
        .where(CaseRow.report_id.in_([*recent, position.report_id]),
               CaseRow.case_id.in_(here))
        .order_by(*HISTORY_ORDER)
    ).all()
    found: dict[str, list[TailPoint]] = {}
    for case_id, report_id, layer_ms, spread in rows:
        found.setdefault(case_id, []).append(TailPoint(report_id, layer_ms, spread))
    return found


def alerted_changes(session: Session, series: str, case_ids: Collection[str],
                    report_ids: Collection[int], opened_by_other_than: int
                    ) -> set[tuple[str, int]]:
    """(case id, first bad report id) of the series' alerts on these cases whose first bad
    report is one of ``report_ids``, opened by another report than this one: the changes
    already told."""
    if not case_ids or not report_ids:
        return set()
    rows = session.execute(
        select(AlertCaseRow.case_id, AlertRow.first_bad_report_id)
        .join(AlertRow, AlertRow.id == AlertCaseRow.alert_id)
        .where(AlertRow.series == series, AlertCaseRow.case_id.in_(list(case_ids)),
               AlertRow.first_bad_report_id.in_(list(report_ids)),
               AlertRow.report_id != opened_by_other_than)
    ).all()
    return {(case_id, int(report_id)) for case_id, report_id in rows}


def report_dates(session: Session, report_ids: Collection[int]) -> dict[int, str]:
    if not report_ids:
        return {}
    return {int(i): d for i, d in session.execute(
        select(ReportRow.id, ReportRow.date).where(ReportRow.id.in_(list(report_ids))))}


def series_point_matrix(session: Session, series: str
                        ) -> tuple[list[int], dict[str, list[tuple[int, float, float | None]]]]:
    """Every report of the series in history order, and each case's points (its index in
    that order, layer time, window spread): what a full recompute reads, in one query."""
    rows = session.execute(
        select(ReportRow.id, CaseRow.case_id, CaseRow.layer_ms, CaseRow.window_spread_percent)
        .join(CaseRow, CaseRow.report_id == ReportRow.id)
        .where(ReportRow.series == series).order_by(*HISTORY_ORDER)
    ).all()
    order: dict[int, int] = {}
    points: dict[str, list[tuple[int, float, float | None]]] = {}
    for report_id, case_id, layer_ms, spread in rows:
        index = order.setdefault(int(report_id), len(order))
        points.setdefault(case_id, []).append((index, layer_ms, spread))
    return list(order), points


def all_series(session: Session) -> list[str]:
    """Every series stored."""
    return list(session.execute(
        select(ReportRow.series).distinct().order_by(ReportRow.series)).scalars())


def triaged_keys(session: Session) -> set[tuple[int, str, str | None]]:
    """(first bad report, direction, phase) of the alerts someone triaged."""
    return {(int(r), d, p) for r, d, p in session.execute(
        select(AlertRow.first_bad_report_id, AlertRow.direction, AlertRow.phase)
        .where(AlertRow.state != "new"))}


def delete_untriaged(session: Session) -> int:
    """Every alert still ``new`` (a full recompute opens them again); how many."""
    result = session.execute(delete(AlertRow).where(AlertRow.state == "new"))
    return int(result.rowcount)  # type: ignore[attr-defined]


def report_alert_keys(session: Session, report_id: int
                      ) -> dict[tuple[int, str, str | None], int]:
    """The alerts this report's ingest opened, by (first bad report, direction, phase)."""
    return {(int(r), d, p): int(i) for i, r, d, p in session.execute(
        select(AlertRow.id, AlertRow.first_bad_report_id, AlertRow.direction, AlertRow.phase)
        .where(AlertRow.report_id == report_id))}


def replace_alert(session: Session, alert_id: int, alert: NewAlert) -> None:
    """The alert as detection now sees it (a report grown by appended cases); its state,
    log and deliveries stay."""
    session.execute(update(AlertRow).where(AlertRow.id == alert_id).values(
        **{name: getattr(alert, name) for name in _OPENED}, updated_at=utcnow()))
    session.execute(delete(AlertCaseRow).where(AlertCaseRow.alert_id == alert_id))
    session.add_all([AlertCaseRow(alert_id=alert_id, case_id=c.case_id,
                                  change_percent=c.change_percent,
                                  phase_change_percent=c.phase_change_percent)
                     for c in alert.cases])
    session.flush()


def invalid_alerts(session: Session, series: str, case_id: str | None = None) -> int:
    """How many of the series' alerts (those moving ``case_id``, when given) were triaged
    ``invalid``: the false alarms the detector's limits are counted from."""
    query = select(func.count()).select_from(AlertRow).where(
        AlertRow.series == series, AlertRow.state == "invalid")
    if case_id is not None:
        query = query.where(AlertRow.id.in_(
            select(AlertCaseRow.alert_id).where(AlertCaseRow.case_id == case_id)))
    return int(session.execute(query).scalar_one())
