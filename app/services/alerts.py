"""Alerts: opened at ingest for the changes a report shows (``alert_detect``), one per
change across every case it moved (the cases grouped by first bad report, direction and
the phase that moved most), its why in one sentence (``ingest.why``); listed, read and
triaged (admin scope, who/when/why logged); POSTed to the webhooks after the commit
(``app.services.webhooks``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.orm import Session

from app.models import ALERT_STATES
from app.repository import alerts as alerts_repo
from app.repository import history as history_repo
from app.repository import pairs as pairs_repo
from app.services import webhooks
from app.services.alert_detect import Moved, moved_cases
from app.services.alert_list import Alert
from app.services.auth import admin_name, authorise
from app.services.explain import attribute_cases
from app.services.history import case_history
from app.services.marks import reason_problem
from ingest import provenance
from ingest.attribution import Attribution
from ingest.detector_limits import Limits, series_limits
from ingest.grouping import dimension_label, shared_dimensions
from ingest.regressions import METRIC
from ingest.why import Change, ReportRef, why_sentence

log = logging.getLogger("moescope")

AlertState = Literal["new", "acknowledged", "invalid", "fixed"]
STATES = ALERT_STATES
Key = tuple[int, str, str | None]  # first bad report, direction, phase
# The reports before the first bad one whose median phases and GPU state a case's are
# compared with: the level before the step. Each costs a report body decoded (~4 ms), and
# a step's level is plain from a few.
ATTRIBUTION_REPORTS = 5


@dataclass(frozen=True)
class _Case:
    moved: Moved
    attribution: Attribution | None

    @property
    def phase_percent(self) -> float | None:
        a = self.attribution
        return a.phases[0].percent if a is not None and a.phases else None


def _groups(session: Session, moved: Sequence[Moved], window: int) -> dict[Key, list[_Case]]:
    by_report: dict[int, list[Moved]] = {}
    for m in moved:
        by_report.setdefault(m.first_bad_report_id, []).append(m)
    groups: dict[Key, list[_Case]] = {}
    for report_id, members in by_report.items():
        why = attribute_cases(session, report_id, [m.case_id for m in members], window)
        for m in members:
            attribution = why.get(m.case_id)
            key = (report_id, m.status, attribution.top_phase if attribution else None)
            groups.setdefault(key, []).append(_Case(m, attribution))
    return groups


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _new_alert(session: Session, report_id: int, key: Key, cases: Sequence[_Case],
               others: int, dimensions: Mapping[str, Mapping[str, Any]]) -> alerts_repo.NewAlert:
    first_bad, direction, phase = key
    position = history_repo.report_position(session, first_bad)
    last_good = pairs_repo.previous_report(session, first_bad)
    metas = history_repo.report_metas(session, {first_bad, *([last_good] if last_good else [])})
    dates = alerts_repo.report_dates(session, metas)
    changes = [c.moved.change_percent for c in cases]
    phases = [p for c in cases if (p := c.phase_percent) is not None]
    gpu_state = _unique([s for c in cases if c.attribution for s in c.attribution.gpu_state])
    moved_from = provenance.changes(metas[last_good], metas[first_bad]) if last_good else []
    shared = shared_dimensions([dimensions[c.moved.case_id] for c in cases
                                if c.moved.case_id in dimensions] or [{}])
    change = Change(len(cases), dimension_label(shared), min(changes), max(changes), phase,
                    min(phases, default=None), max(phases, default=None), others, moved_from,
                    gpu_state, ReportRef(last_good, dates[last_good]) if last_good else None,
                    ReportRef(first_bad, dates[first_bad]))
    return alerts_repo.NewAlert(
        report_id=report_id, gpu=position.gpu, series=position.series, metric=METRIC,
        direction=direction, phase=phase, change_min_percent=change.low_percent,
        change_max_percent=change.high_percent, phase_min_percent=change.phase_low_percent,
        phase_max_percent=change.phase_high_percent, gpu_state_changes=gpu_state,
        provenance_changes=moved_from, last_good_report_id=last_good,
        first_bad_report_id=first_bad, why=why_sentence(change),
        cases=[alerts_repo.AlertCase(c.moved.case_id, c.moved.change_percent, c.phase_percent)
               for c in cases])


def build_alerts(session: Session, report_id: int, moved: Sequence[Moved]
                 ) -> dict[Key, alerts_repo.NewAlert]:
    """The alerts these moved cases of the report make, by key."""
    if not moved:
        return {}
    groups = _groups(session, moved, ATTRIBUTION_REPORTS)
    dimensions = {c["id"]: c for c in pairs_repo.case_dimensions(session, report_id)}
    order = {case_id: i for i, case_id in enumerate(dimensions)}
    return {key: _new_alert(session, report_id, key,
                            sorted(cases, key=lambda c: order.get(c.moved.case_id, len(order))),
                            len(moved) - len(cases), dimensions)
            for key, cases in sorted(groups.items(), key=lambda item: item[0][0])}


def _store(session: Session, report_id: int,
           found: Mapping[Key, alerts_repo.NewAlert]) -> list[int]:
    """Insert the new alerts; a report grown by appends updates those it opened before."""
    existing = alerts_repo.report_alert_keys(session, report_id)
    opened = []
    for key, alert in found.items():
        if key in existing:
            alerts_repo.replace_alert(session, existing[key], alert)
        else:
            opened.append(alerts_repo.insert_alert(session, alert))
    return opened


def open_alerts(session: Session, report_id: int) -> list[int]:
    """Open the alerts of a report just stored (or grown), in the caller's transaction, and
    queue their webhooks for after its commit. Never fails the ingest: a failure here is
    logged and rolled back to before it (a savepoint), and the report lands without
    alerts (``moescope alerts rebuild`` opens them later)."""
    try:
        with session.begin_nested():
            opened = _store(session, report_id,
                            build_alerts(session, report_id, moved_cases(session, report_id)))
            documents = [alert_document(alerts_repo.get_alert(session, i)) for i in opened
                         if webhooks.configured()]
    except Exception:
        log.exception("alerts for report %s were not opened", report_id)
        return []
    webhooks.after_commit(session, documents)
    return opened


def alert_document(alert: Alert) -> dict[str, Any]:
    """An alert as plain data, the API's field names: what the API answers and what a
    webhook receives (beside ``text``)."""
    a = alert.opened
    return {
        "id": alert.id, "state": alert.state, "createdAt": alert.created_at.isoformat(),
        "updatedAt": alert.updated_at.isoformat(), "reportId": a.report_id, "gpu": a.gpu,
        "series": a.series, "metric": a.metric, "direction": a.direction, "phase": a.phase,
        "changeMinPercent": a.change_min_percent, "changeMaxPercent": a.change_max_percent,
        "phaseMinPercent": a.phase_min_percent, "phaseMaxPercent": a.phase_max_percent,
        "gpuStateChanges": list(a.gpu_state_changes),
        "provenanceChanges": list(a.provenance_changes),
        "lastGoodReportId": a.last_good_report_id, "firstBadReportId": a.first_bad_report_id,
        "why": a.why,
        "cases": [{"caseId": c.case_id, "changePercent": c.change_percent,
                   "phaseChangePercent": c.phase_change_percent} for c in a.cases],
    }


def list_alerts(session: Session, *, state: str | None = None, gpu: str | None = None,
                since: datetime | None = None, limit: int = 100, offset: int = 0
                ) -> tuple[list[Alert], int]:
    return alerts_repo.list_alerts(session, state=state, gpu=gpu, since=since, limit=limit,
                                   offset=offset)


def get_alert(session: Session, alert_id: int) -> Alert:
    return alerts_repo.get_alert(session, alert_id)


def set_state(session: Session, alert_id: int, state: AlertState, reason: str,
              who: str) -> Alert:
    """Triage: the new state, logged with who, when, the state before and why."""
    alerts_repo.set_state(session, alert_id, state, reason, who)
    return alerts_repo.get_alert(session, alert_id)


def triage(session: Session, token: str | None, alert_id: int, state: AlertState,
           reason: str) -> str:
    """What the alerts page's buttons do for whoever holds ``token`` (the sign-in
    cookie's), behind the API's admin check. Returns what happened in words; raises
    Unauthorized or Forbidden (not an admin), NotFound, or ValueError (a bad reason, its
    field named). The caller commits."""
    who = authorise(session, token, "admin").name
    problem = reason_problem(reason)
    if problem is not None:
        raise ValueError(problem.replace("the history", "the alert's log"))
    set_state(session, alert_id, state, reason.strip(), who)
    return f"alert #{alert_id}: {state}"


@dataclass(frozen=True)
class Inbox:
    alerts: list[Alert]  # newest first; one, with its log and deliveries, when asked by id
    total: int
    admin: str | None  # the signed-in admin's token name: they may triage
    # One alert alone: each moved case's detector limits on its series.
    limits: Mapping[str, Limits] = field(default_factory=dict)


INBOX_SIZE = 100


def inbox(session: Session, token: str | None, state: str | None = None,
          alert_id: int | None = None) -> Inbox:
    """What the alerts page draws: the alerts in ``state`` (any: None), or one alert."""
    admin = admin_name(session, token)
    if alert_id is not None:
        alert = alerts_repo.get_alert(session, alert_id)
        return Inbox([alert], 1, admin, case_limits(session, alert))
    found, total = alerts_repo.list_alerts(session, state=state, limit=INBOX_SIZE)
    return Inbox(found, total, admin)


def case_limits(session: Session, alert: Alert) -> dict[str, Limits]:
    """Each case the alert moved: what the detector can see on its series (its noise, the
    smallest step it catches, its false alarms), as the case's history says it."""
    a = alert.opened
    out = {}
    for case in a.cases:
        points = case_history(session, case.case_id, a.gpu, a.series).points
        values = [p.point.layer_ms for p in points if p.point.layer_ms is not None]
        out[case.case_id] = series_limits(values,
                                          false_alarms(session, a.series, case.case_id))
    return out


def false_alarms(session: Session, series: str, case_id: str | None = None) -> int:
    """The series' alerts triaged ``invalid`` (moving ``case_id``, when given): what
    ``ingest.detector_limits.series_limits`` takes as ``invalid_alerts``."""
    return alerts_repo.invalid_alerts(session, series, case_id)
