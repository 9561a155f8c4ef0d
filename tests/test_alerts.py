"""Alerts opened at ingest, on series built here, on SQLite and Postgres: one alert for a
step across nine cases with its why; creeping steps told; an outlier never; triage."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from alert_helpers import (
    NEW_DRIVER,
    OLD_DRIVER,
    case_of,
    combine_step,
    layer_ms,
    mean_change_percent,
    quiet_series,
    scale_from,
)
from compare_helpers import nvfp4_mega, series
from fastapi.testclient import TestClient
from history_helpers import ingest
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.case_fields import CaseFilter
from app.export.service import export_report
from app.repository import alerts as alerts_repo
from app.repository import reports as reports_repo
from app.services import alerts, history_view
from app.services.alert_list import Alert
from cli.main import main
from ingest.detector_limits import limits_text

Body = dict[str, Any]
ALERTS = "/api/v1/alerts"
STEP_AT = 20
MIN_SEGMENT = 5  # ingest.changepoints.ChangePointSettings().min_segment


def _all_alerts(session: Session) -> list[Alert]:
    return alerts.list_alerts(session, limit=1000)[0]


def _phase_percent(bodies: list[Body], case_id: str, at: int, window: int = 5) -> float:
    """The combine phase at ``at`` against its median over the ``window`` reports before
    (app.services.alerts.ATTRIBUTION_REPORTS)."""
    before = [case_of(b, case_id)["phaseMS"]["combine"] for b in bodies[max(0, at - window):at]]
    base = statistics.median(before)
    return (case_of(bodies[at], case_id)["phaseMS"]["combine"] - base) / base * 100


def test_a_combine_step_on_nine_cases_opens_one_alert_that_says_why(
    session: Session, reference: Body
) -> None:
    bodies = series(reference, STEP_AT + MIN_SEGMENT + 3)
    slowed = nvfp4_mega(bodies[0])
    combine_step(bodies, slowed, STEP_AT, 20.0)
    ids = [ingest(session, b) for b in bodies]

    [alert] = _all_alerts(session)
    a = alert.opened
    assert [c.case_id for c in a.cases] == slowed  # in the report's order
    assert (a.direction, a.phase, a.metric) == ("regression", "combine", "layerMS")
    assert (a.last_good_report_id, a.first_bad_report_id) == (ids[STEP_AT - 1], ids[STEP_AT])
    assert a.provenance_changes == [f"driver {OLD_DRIVER} -> {NEW_DRIVER}"]
    # The change is the mean after the step against the mean before it, over the points the
    # opening report saw.
    opened_at = ids.index(a.report_id)
    assert opened_at == STEP_AT + MIN_SEGMENT - 1
    changes = {c: mean_change_percent(layer_ms(bodies[:opened_at + 1], c), STEP_AT)
               for c in slowed}
    assert {c.case_id: round(c.change_percent, 9) for c in a.cases} == {
        c: round(v, 9) for c, v in changes.items()}
    phases = [_phase_percent(bodies, c, STEP_AT) for c in slowed]
    dates = [b["meta"]["date"] for b in bodies]
    assert a.why == (
        f"9 inference nvfp4 mega cases {min(changes.values()):+.1f} % to "
        f"{max(changes.values()):+.1f} %, all in combine ({min(phases):+.0f} % to "
        f"{max(phases):+.0f} %); nothing else moved; coincides with driver {OLD_DRIVER} → "
        f"{NEW_DRIVER}; last good report {ids[STEP_AT - 1]} ({dates[STEP_AT - 1]}), first "
        f"bad report {ids[STEP_AT]} ({dates[STEP_AT]})")

    # The report's export tells the alert's why and the host it ran on.
    exported = export_report(session, a.report_id, CaseFilter()).html
    assert f"<li>{a.why}</li>" in exported
    host = exported.split('id="export-host"')[1].split("</div>")[0]
    assert f"<span>driver <b>{NEW_DRIVER}</b></span>" in host
    assert "<span>host <b>gb300-a</b></span>" in host


def test_two_small_steps_a_week_apart_are_both_told(session: Session, reference: Body) -> None:
    case_id = reference["cases"][0]["id"]
    bodies = quiet_series(reference, 40, case_id, spread=1.0)
    scale_from(bodies, case_id, 20, 1.04)
    scale_from(bodies, case_id, 27, 1.04)
    ids = [ingest(session, b) for b in bodies]
    told = sorted((a.opened.first_bad_report_id, round(a.opened.change_min_percent))
                  for a in _all_alerts(session)
                  if case_id in {c.case_id for c in a.opened.cases})
    assert told == [(ids[20], 4), (ids[27], 4)]


def test_a_single_outlier_opens_no_alert(session: Session, reference: Body) -> None:
    case_id = reference["cases"][0]["id"]
    bodies = quiet_series(reference, 35, case_id, spread=1.0)
    scale_from(bodies, case_id, 20, 1.30, until=21)
    for body in bodies:
        ingest(session, body)
    assert [a.opened.cases for a in _all_alerts(session)
            if case_id in {c.case_id for c in a.opened.cases}] == []


def test_triage_needs_admin_and_is_logged(
    client: TestClient, session: Session, reference: Body, auth: Any
) -> None:
    bodies = series(reference, STEP_AT + MIN_SEGMENT + 1)
    combine_step(bodies, nvfp4_mega(bodies[0]), STEP_AT, 20.0)
    for body in bodies:
        ingest(session, body)
    [listed] = client.get(ALERTS, params={"state": "new"}).json()["items"]
    url = f"{ALERTS}/{listed['id']}"
    change = {"state": "invalid", "reason": "a noisy node"}
    assert client.patch(url, json=change).status_code == 401
    assert client.patch(url, json=change, headers=auth("ingest")).status_code == 403
    assert client.get(url).json()["state"] == "new"

    admin = auth("admin")
    answer = client.patch(url, json=change, headers=admin)
    assert answer.status_code == 200, answer.text
    detail = client.get(url).json()
    assert detail["state"] == "invalid"
    [event] = detail["events"]
    assert (event["fromState"], event["toState"], event["reason"]) == (
        "new", "invalid", "a noisy node")
    assert event["createdBy"].startswith("test-admin-")
    assert client.get(ALERTS, params={"state": "new"}).json()["items"] == []
    first_case = listed["cases"][0]["caseId"]
    assert (alerts.false_alarms(session, listed["series"]),
            alerts.false_alarms(session, listed["series"], first_case),
            alerts.false_alarms(session, listed["series"], "no such case"),
            alerts.false_alarms(session, "no such series")) == (1, 1, 0, 0)
    assert [a["id"] for a in client.get(ALERTS, params={"state": "invalid"}).json()["items"]
            ] == [listed["id"]]
    assert client.get(ALERTS, params={"gpu": "no such GPU"}).json()["total"] == 0
    assert client.get(ALERTS, params={"since": "2000-01-01"}).json()["total"] == 1
    assert client.get(ALERTS, params={"since": "2999-01-01"}).json()["total"] == 0
    assert client.get(ALERTS, params={"since": "0"}).status_code == 422
    assert client.patch(url, json={"state": "gone", "reason": "x"},
                        headers=admin).status_code == 422
    assert client.patch(f"{ALERTS}/999999", json=change, headers=admin).status_code == 404


def test_rebuild_recomputes_and_keeps_triaged_alerts(
    session: Session, reference: Body, database_url: str, capsys: Any
) -> None:
    bodies = series(reference, STEP_AT + MIN_SEGMENT + 4)
    slowed = nvfp4_mega(bodies[0])
    combine_step(bodies, slowed, STEP_AT, 20.0)
    ids = [ingest(session, b) for b in bodies]
    [opened] = _all_alerts(session)

    assert main(["alerts", "rebuild", "--database-url", database_url]) == 0
    assert capsys.readouterr().out.startswith("1 alert(s) opened over 1 series, 0 triaged")
    session.expire_all()
    [rebuilt] = _all_alerts(session)
    assert rebuilt.id != opened.id
    a = rebuilt.opened
    assert sorted(c.case_id for c in a.cases) == sorted(slowed)
    assert (a.first_bad_report_id, a.last_good_report_id, a.phase) == (
        ids[STEP_AT], ids[STEP_AT - 1], "combine")
    # Over the whole series: the mean after the step against the mean before it.
    assert {c.case_id: round(c.change_percent, 9) for c in a.cases} == {
        c: round(mean_change_percent(layer_ms(bodies, c), STEP_AT), 9) for c in slowed}

    alerts.set_state(session, rebuilt.id, "acknowledged", "known driver issue", "someone")
    session.commit()
    assert main(["alerts", "rebuild", "--database-url", database_url]) == 0
    session.expire_all()
    assert [(x.id, x.state) for x in _all_alerts(session)] == [(rebuilt.id, "acknowledged")]


def test_a_failure_opening_alerts_leaves_the_report_whole(
    session: Session, reference: Body, monkeypatch: Any, caplog: Any
) -> None:
    """A database error inside alert detection (which aborts a Postgres transaction) is
    rolled back to the savepoint: the report lands with every case, without alerts."""

    def broken(session: Session, *_: Any) -> None:
        session.execute(text("SELECT * FROM no_such_table"))

    monkeypatch.setattr(alerts_repo, "tail_points", broken)
    bodies = series(reference, 2)
    ids = [ingest(session, b) for b in bodies]
    assert [reports_repo.case_count(session, i) for i in ids] == [63, 63]
    assert _all_alerts(session) == []
    assert "alerts for report" in caplog.text and "no_such_table" in caplog.text


def test_history_says_the_detectors_limits_with_the_invalid_alerts(
    session: Session, reference: Body
) -> None:
    # Two +4 % steps: two alerts; one triaged invalid is the series' one false alarm.
    case_id = reference["cases"][0]["id"]
    bodies = quiet_series(reference, 40, case_id, spread=1.0)
    scale_from(bodies, case_id, 20, 1.04)
    scale_from(bodies, case_id, 27, 1.04)
    for body in bodies:
        ingest(session, body)
    first = min(a.id for a in _all_alerts(session)
                if case_id in {c.case_id for c in a.opened.cases})
    session.execute(text("UPDATE alerts SET state = 'invalid' WHERE id = :i"), {"i": first})
    page = history_view.history_page(session, [case_id], bodies[0]["meta"]["gpu"], None)
    # Noise by hand: 1.4826 x the MAD of successive differences / sqrt(2), % of the median.
    values = [p["layerMS"] for p in page.view.points]
    steps = [b - a for a, b in zip(values, values[1:], strict=False)]
    middle = statistics.median(steps)
    noise = 1.4826 * statistics.median(abs(d - middle) for d in steps) / 2 ** 0.5 / (
        statistics.median(values)) * 100
    assert page.limits.startswith(f"change points: noise {noise:.2g} %, smallest step caught ")
    assert page.limits.endswith(
        f"false alarms {1 / len(values) * 1000:.2g} per 1,000 points (alerts triaged invalid)")
    # The alert says the same of its case's series.
    [seen] = alerts.inbox(session, None, alert_id=first).limits.values()
    assert limits_text(seen) == page.limits
    assert seen.noise_percent == pytest.approx(noise)
    assert seen.false_alarms_per_1000 == pytest.approx(1 / len(values) * 1000)


def test_history_says_whether_a_change_point_confirms_the_judges_flag(
    session: Session, reference: Body
) -> None:
    # The judge flags a 30 % outlier at once; ten quiet reports later no change point
    # followed it: overruled. A +20 % step that stays: its change point confirms the flag.
    case_id = reference["cases"][0]["id"]
    bodies = quiet_series(reference, 30, case_id, spread=1.0)
    scale_from(bodies, case_id, 20, 1.30, until=21)
    ids = [ingest(session, b) for b in bodies]
    gpu = bodies[0]["meta"]["gpu"]
    page = history_view.history_page(session, [case_id], gpu, None)
    assert page.changes == (f"change points: none followed the flag on report #{ids[20]}: "
                            "an outlier, not a change")

    stepped = series(reference, STEP_AT + MIN_SEGMENT + 1)
    slowed = nvfp4_mega(stepped[0])
    combine_step(stepped, slowed, STEP_AT, 20.0)
    for i, body in enumerate(stepped):  # another GPU, other runs: a series of its own
        body["meta"]["gpu"] = "stepped GPU"
        body["meta"]["runId"] = f"stepped-{i}"
    step_ids = [ingest(session, b) for b in stepped]
    step_case = sorted(slowed)[0]
    page = history_view.history_page(session, [step_case], "stepped GPU", None)
    change = mean_change_percent(layer_ms(stepped, step_case), STEP_AT)
    assert page.changes.startswith(
        f"change points: a change at report #{step_ids[STEP_AT]} ({change:+.1f} %) confirms "
        "the flag on report #"), page.changes
