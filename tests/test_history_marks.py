"""Known steps and outliers (the marks API and the judging that honours them), provenance
changes on history, and a bounded history (a date range, the newest points in full, the
older summarised), on SQLite and Postgres, over synthetic series built from the reference."""

from __future__ import annotations

import importlib
import statistics
from collections.abc import Callable
from typing import Any

import pytest
from api_helpers import REPORTS, error_detail
from fastapi.testclient import TestClient
from history_helpers import ingest, synthetic_series
from page_helpers import texts
from sqlalchemy.orm import Session

from app import figures
from app.core.errors import Forbidden, NotFound, Unauthorized
from app.main import create_app
from app.services import history_view, marks
from app.services.history import case_history, point_dict, report_regressions
from cli.main import main
from ingest.regressions import Settings

Body = dict[str, Any]
Auth = Callable[[str], dict[str, str]]


def _at(report: Body, index: int, factor: float) -> None:
    """Case ``index`` of the report measured ``factor`` times its times (and throughput)."""
    case = report["cases"][index]
    for key in ("forwardMS", "backwardMS", "layerMS"):
        if case.get(key) is not None:
            case[key] *= factor
    case["windows"] = {k: [w * factor for w in ws] for k, ws in case["windows"].items()}
    case["usefulTFPerGPU"] /= factor


def _statuses(session: Session, report_ids: list[int], case: str) -> list[str]:
    return [next(i.verdict.status for i in report_regressions(session, rid).items
                 if i.case_id == case) for rid in report_ids]


def test_a_step_restarts_the_baseline(client: TestClient, session: Session, reference: Body,
                                      auth: Auth, database_url: str) -> None:
    """Eight reports at one level, then five 30 % slower (say, an expected driver upgrade):
    unmarked, each of the slower ones is a regression against the old level; with the first
    of them marked as a step, none is (its reports are judged against the new level)."""
    reports = synthetic_series(reference, 13, seed=4)
    for report in reports[8:]:
        for index in range(len(report["cases"])):
            _at(report, index, 1.3)
    ids = [ingest(session, r) for r in reports]
    case = reference["cases"][0]["id"]
    assert _statuses(session, ids[8:], case) == ["regression"] * 5

    admin = auth("admin")
    put = client.put(f"{REPORTS}/{ids[8]}/marks/step", headers=admin,
                     json={"reason": "driver 580.95 -> 580.159, expected"})
    assert put.status_code == 200, put.text
    mark = put.json()
    assert (mark["kind"], mark["reportId"], mark["reason"]) == (
        "step", ids[8], "driver 580.95 -> 580.159, expected")
    assert mark["createdBy"].startswith("test-admin-")
    session.expire_all()
    # The step itself and the next two have fewer than 3 points at the new level.
    assert _statuses(session, ids[8:], case) == ["insufficient_history"] * 3 + ["unchanged"] * 2
    newest = report_regressions(session, ids[-1])
    assert newest.flagged == []
    verdict = next(i.verdict for i in newest.items if i.case_id == case)
    level = sorted(r["cases"][0]["layerMS"] for r in reports[8:12])
    assert verdict.baseline_points == 4
    assert verdict.baseline == pytest.approx((level[1] + level[2]) / 2)
    # The regressions API answers the same.
    body = client.get(f"{REPORTS}/{ids[-1]}/regressions").json()
    assert body["items"] == [] and body["counts"]["unchanged"] == 63
    # And the CI gate: exit 0, nothing regressed (1 without the mark, below).
    db = ["--database-url", database_url]
    assert main(["regressions", str(ids[-1]), *db]) == 0

    # History judges every point the same way, and shows the mark.
    history = case_history(session, case, reference["meta"]["gpu"])
    assert [p.verdict.status for p in history.points[8:]] == _statuses(session, ids[8:], case)
    assert [(m.report_id, m.kind) for m in history.marks] == [(ids[8], "step")]
    assert history.points[8].marks == ("step",)

    # Reversible: without the mark the old verdicts come back.
    assert client.delete(f"{REPORTS}/{ids[8]}/marks/step", headers=admin).status_code == 204
    session.expire_all()
    assert _statuses(session, ids[8:], case) == ["regression"] * 5
    assert main(["regressions", str(ids[-1]), *db]) == 1
    error_detail(client.delete(f"{REPORTS}/{ids[8]}/marks/step", headers=admin), 404,
                 "not_found")


def test_an_excluded_outlier_leaves_the_baseline(client: TestClient, session: Session,
                                                 reference: Body, auth: Auth) -> None:
    reports = synthetic_series(reference, 7, seed=5)
    _at(reports[4], 0, 1.6)  # one bad run of case 0
    ids = [ingest(session, r) for r in reports]
    case = reference["cases"][0]["id"]
    times = [r["cases"][0]["layerMS"] for r in reports]
    settings = Settings(window=4)

    def newest() -> Any:
        return next(i.verdict for i in report_regressions(session, ids[-1], settings).items
                    if i.case_id == case)

    with_outlier = newest()
    assert with_outlier.baseline == pytest.approx(statistics.median(times[2:6]))
    put = client.put(f"{REPORTS}/{ids[4]}/marks/outlier", headers=auth("admin"),
                     json={"reason": "node 7 throttled"})
    assert put.status_code == 200, put.text
    session.expire_all()
    without = newest()
    # The last four reports but the outlier: 1, 2, 3, 5.
    assert without.baseline == pytest.approx(statistics.median([times[i] for i in (1, 2, 3, 5)]))
    assert without.baseline_points == 4
    # The outlier itself is still judged (and flagged) on history, and named there.
    history = case_history(session, case, reference["meta"]["gpu"], settings=settings)
    assert history.points[4].verdict.status == "regression"
    assert history.points[4].marks == ("outlier",)
    assert history.points[6].verdict.baseline == without.baseline


def test_marks_need_an_admin_and_a_reason(client: TestClient, session: Session,
                                          reference: Body, auth: Auth) -> None:
    rid = ingest(session, reference)
    path = f"{REPORTS}/{rid}/marks"
    reason = {"reason": "known"}
    assert client.put(f"{path}/step", json=reason).status_code == 401
    error_detail(client.put(f"{path}/step", json=reason, headers=auth("ingest")), 403,
                 "forbidden")
    admin = auth("admin")
    error_detail(client.put(f"{path}/sideways", json=reason, headers=admin), 422,
                 "validation_error")
    for bad in ("", "a\x00b", "x" * 2001):
        error_detail(client.put(f"{path}/step", json={"reason": bad}, headers=admin), 422,
                     "validation_error")
    error_detail(client.put(f"{REPORTS}/999999/marks/step", json=reason, headers=admin), 404,
                 "not_found")
    assert client.put(f"{path}/outlier", json=reason, headers=admin).status_code == 200
    listed = client.get(path).json()
    assert [(m["kind"], m["reason"]) for m in listed] == [("outlier", "known")]
    # Marks go with their report.
    assert client.delete(f"{REPORTS}/{rid}", headers=admin).status_code == 204
    error_detail(client.get(path), 404, "not_found")


def test_a_driver_change_is_marked_on_history(client: TestClient, session: Session,
                                              reference: Body) -> None:
    reports = synthetic_series(reference, 6, seed=6)
    for i, report in enumerate(reports):
        report["meta"]["host"] = {"driver": "580.95" if i < 4 else "580.159",
                                  "cuda": "13.0", "torch": "2.11.0", "nccl": "2.27.7"}
    reports[5]["meta"]["host"]["torch"] = "2.12.0"
    ids = [ingest(session, r) for r in reports]
    case = reference["cases"][0]["id"]
    gpu = reference["meta"]["gpu"]

    history = case_history(session, case, gpu)
    assert [(c.report_id, c.changes) for c in history.provenance_changes] == [
        (ids[4], ["driver 580.95 -> 580.159"]), (ids[5], ["torch 2.11.0 -> 2.12.0"])]
    body = client.get("/api/v1/history", params={"caseId": case, "gpu": gpu}).json()
    assert body["provenanceChanges"] == [
        {"reportId": ids[4], "date": reports[4]["meta"]["date"],
         "changes": ["driver 580.95 -> 580.159"]},
        {"reportId": ids[5], "date": reports[5]["meta"]["date"],
         "changes": ["torch 2.11.0 -> 2.12.0"]}]

    # The chart draws a vertical line at each, named.
    spec = figures.history_specs([point_dict(p) for p in history.points], [],
                                 [{"reportId": c.report_id, "date": c.date,
                                   "changes": c.changes} for c in history.provenance_changes],
                                 [], threshold_percent=5.0)["layer-time"]
    lines = [s for s in spec["layout"]["shapes"] if s.get("name") == "provenance"]
    assert [s["x0"] for s in lines] == [reports[4]["meta"]["date"], reports[5]["meta"]["date"]]
    texts = [a["text"] for a in spec["layout"]["annotations"]]
    assert "driver 580.95 -> 580.159" in texts and "torch 2.11.0 -> 2.12.0" in texts


def test_history_is_bounded_and_takes_a_range(client: TestClient, session: Session,
                                              reference: Body) -> None:
    reports = synthetic_series(reference, 30, seed=7)  # 2026-09-01 .. 2026-09-30
    ids = [ingest(session, r) for r in reports]
    case = reference["cases"][0]["id"]
    gpu = reference["meta"]["gpu"]
    times = [r["cases"][0]["layerMS"] for r in reports]

    whole = case_history(session, case, gpu)
    assert whole.total == 30 and len(whole.points) == 30 and whole.buckets == []
    body = client.get("/api/v1/history",
                      params={"caseId": case, "gpu": gpu, "points": 10}).json()
    assert body["total"] == 30
    # The newest 5 in full, judged as in the whole history; 25 older ones in 5 buckets.
    assert [p["reportId"] for p in body["points"]] == ids[25:]
    assert [p["status"] for p in body["points"]] == [
        p.verdict.status for p in whole.points[25:]]
    assert [p["baseline"] for p in body["points"]] == [
        p.verdict.baseline for p in whole.points[25:]]
    assert [(b["dateFrom"], b["reports"]) for b in body["buckets"]] == [
        (reports[i]["meta"]["date"], 5) for i in range(0, 25, 5)]
    first = body["buckets"][0]
    assert first["layerMS"] == pytest.approx({"mean": statistics.fmean(times[:5]),
                                              "min": min(times[:5]), "max": max(times[:5])})
    assert (first["dateFrom"], first["dateTo"]) == ("2026-09-01", "2026-09-05")

    # A range: 2026-09-11 to 2026-09-20, every point in it, judged against earlier ones.
    ranged = client.get("/api/v1/history", params={
        "caseId": case, "gpu": gpu, "since": "2026-09-11", "until": "2026-09-20"}).json()
    assert [p["reportId"] for p in ranged["points"]] == ids[10:20]
    assert ranged["total"] == 10 and ranged["buckets"] == []
    assert {p["baselinePoints"] for p in ranged["points"]} == {10, 11, 12, 13, 14, 15, 16, 17,
                                                               18, 19}
    reversed_range = client.get("/api/v1/history", params={
        "caseId": case, "gpu": gpu, "since": "2026-09-20", "until": "2026-09-11"})
    assert reversed_range.status_code == 422
    assert "since" in reversed_range.text
    too_few = client.get("/api/v1/history", params={"caseId": case, "gpu": gpu, "points": 2})
    assert too_few.status_code == 422


def test_a_case_new_to_its_series(session: Session, reference: Body) -> None:
    reports = synthetic_series(reference, 5, seed=8)
    new = dict(reports[-1]["cases"][0], id="brand-new-case")
    reports[-1]["cases"].append(new)
    ids = [ingest(session, r) for r in reports]
    items = {i.case_id: i.verdict for i in report_regressions(session, ids[-1]).items}
    assert items["brand-new-case"].status == "insufficient_history"
    assert items["brand-new-case"].baseline_points == 0
    assert {v.baseline_points for c, v in items.items() if c != "brand-new-case"} == {4}


def test_history_view_overlays_other_cases_and_names_the_missing(
    session: Session, reference: Body
) -> None:
    reports = synthetic_series(reference, 4, seed=9)
    ingest_ids = [ingest(session, r) for r in reports]
    gpu = reference["meta"]["gpu"]
    main, other = (reference["cases"][i]["id"] for i in (1, 3))  # mxfp8 / nvfp4 mega, i1
    view = history_view.history_view(session, [main, other, "no-such-case"], gpu, None,
                                     "usefulTFPerGPU")
    assert view.overlaid == [other] and view.missing == ["no-such-case"]
    spec = view.specs["throughput"]
    drawn = {t["name"]: t["y"] for t in spec["data"] if t.get("mode") == "lines+markers"}
    assert drawn == {main: [r["cases"][1]["usefulTFPerGPU"] for r in reports],
                     other: [r["cases"][3]["usefulTFPerGPU"] for r in reports]}
    # Every overlaid value is inside the y axis.
    assert spec["layout"]["yaxis"]["range"][1] >= max(drawn[other])
    assert view.points[-1]["reportId"] == ingest_ids[-1]
    # Alone, the page offers the configuration's other precisions (and pipelines).
    alone = history_view.history_view(session, [main], gpu, None)
    assert [text for text, _ in alone.overlay_links] == [
        "overlay every precision of this configuration (2 cases)",
        "overlay every precision and pipeline of this configuration (4 cases)"]
    with pytest.raises(NotFound):
        history_view.history_view(session, [main], gpu, None, "nonsense")


def test_history_page_lists_the_changes_and_marks(
    session: Session, reference: Body, settings_env: Callable[..., None]
) -> None:
    create_app()  # the page registers itself once the Dash app exists
    page = importlib.import_module("app.dashboard.pages.history")
    reports = synthetic_series(reference, 5, seed=10)
    for i, report in enumerate(reports):
        report["meta"]["host"] = {"driver": "580.95" if i < 3 else "580.159"}
    ids = [ingest(session, r) for r in reports]
    marks.put_mark(session, ids[3], "step", "driver upgrade, expected", "alice")
    session.commit()
    case = reference["cases"][0]["id"]
    shown = texts(page.layout(caseId=case, gpu=reference["meta"]["gpu"]))
    joined = " ".join(shown)
    assert "driver 580.95 -> 580.159" in joined
    assert "driver upgrade, expected — alice" in joined
    # Every point in the table, the step named in its row.
    assert sum(t.startswith("#") for t in shown) == 5 and "step" in shown
    bad = texts(page.layout(caseId=case, gpu=reference["meta"]["gpu"], since="yesterday"))
    assert "since 'yesterday' is not a date (YYYY-MM-DD)" in " ".join(bad)


def test_history_draws_each_phase(client: TestClient, session: Session, reference: Body) -> None:
    reports = synthetic_series(reference, 4, seed=13)
    for i, report in enumerate(reports):
        report["cases"][0]["phaseMS"] = {"dispatch": 0.3 + i / 100, "experts": 0.5,
                                         "combine": 0.4 * (1.3 if i == 3 else 1.0)}
    ingest_ids = [ingest(session, r) for r in reports]
    case = reference["cases"][0]["id"]
    gpu = reference["meta"]["gpu"]
    body = client.get("/api/v1/history", params={"caseId": case, "gpu": gpu}).json()
    assert [(p["reportId"], p["dispatchMS"], p["expertsMS"], p["combineMS"])
            for p in body["points"]] == [
        (rid, r["cases"][0]["phaseMS"]["dispatch"], 0.5, r["cases"][0]["phaseMS"]["combine"])
        for rid, r in zip(ingest_ids, reports, strict=True)]
    # A case without phases answers null, and its phase chart says it has no point.
    other = client.get("/api/v1/history",
                       params={"caseId": reference["cases"][1]["id"], "gpu": gpu}).json()
    assert {p["combineMS"] for p in other["points"]} == {None}
    view = history_view.history_view(session, [case], gpu, None, "combineMS")
    drawn = next(t for t in view.specs["combine"]["data"] if t.get("mode") == "lines+markers")
    assert drawn["y"] == [r["cases"][0]["phaseMS"]["combine"] for r in reports]


def test_buckets_summarise_every_metric_the_page_can_draw(
    client: TestClient, session: Session, reference: Body
) -> None:
    reports = synthetic_series(reference, 30, seed=14)
    for i, report in enumerate(reports):
        report["cases"][0]["phaseMS"] = {"dispatch": 0.3 + i / 100, "experts": 0.5 - i / 200,
                                         "combine": 0.4 + (i % 7) / 50}
    for r in reports:
        ingest(session, r)
    case = reference["cases"][0]["id"]
    body = client.get("/api/v1/history", params={
        "caseId": case, "gpu": reference["meta"]["gpu"], "points": 10}).json()
    # 25 older reports in 5 buckets of 5: each phase's mean, min and max over its bucket.
    assert [b["reports"] for b in body["buckets"]] == [5] * 5
    for n, bucket in enumerate(body["buckets"]):
        for phase in ("dispatch", "experts", "combine"):
            values = [r["cases"][0]["phaseMS"][phase] for r in reports[5 * n:5 * n + 5]]
            assert bucket[f"{phase}MS"] == pytest.approx(
                {"mean": statistics.fmean(values), "min": min(values), "max": max(values)})
    # Every metric the page offers has its older level.
    assert set(history_view.METRICS) <= set(body["buckets"][0])
    # The combine chart draws the older level: each bucket's mean over its dates.
    spec = figures.history_specs(body["points"], body["buckets"], metric="combineMS",
                                 threshold_percent=5.0)
    mean = next(t for t in spec["combine"]["data"] if t.get("name", "").endswith("bucket mean"))
    assert [y for y in mean["y"] if y is not None] == [
        b["combineMS"]["mean"] for b in body["buckets"] for _ in (0, 1)]


def test_the_page_marks_through_the_service_for_an_admin_only(
    session: Session, reference: Body, settings_env: Callable[..., None],
    token_for: Callable[[str], str],
) -> None:
    create_app()  # the page registers itself once the Dash app exists
    page = importlib.import_module("app.dashboard.pages.history")
    ids = [ingest(session, r) for r in synthetic_series(reference, 5, seed=15)]
    reader, admin = token_for("read"), token_for("admin")
    with pytest.raises(Unauthorized):
        marks.change_mark(session, None, ids[3], "step", "upgrade")
    with pytest.raises(Forbidden):
        marks.change_mark(session, reader, ids[3], "step", "upgrade")
    with pytest.raises(ValueError, match="^reason: say why"):
        marks.change_mark(session, admin, ids[3], "step", "  ")
    with pytest.raises(ValueError, match="^reason: at most 2000 characters, not 2001"):
        marks.change_mark(session, admin, ids[3], "outlier", "x" * 2001)
    with pytest.raises(NotFound):
        marks.change_mark(session, admin, ids[-1] + 1, "step", "upgrade")
    assert marks.change_mark(session, admin, ids[3], "step", " upgrade ") == (
        f"report #{ids[3]} marked as a step")
    session.commit()
    [mark] = marks.report_marks(session, ids[3])
    assert (mark.kind, mark.reason) == ("step", "upgrade")
    assert mark.created_by.startswith("test-admin-")

    args = {"caseIds": [reference["cases"][0]["id"]], "gpu": reference["meta"]["gpu"],
            "series": None, "metric": "layerMS", "since": None, "until": None}
    as_admin = " ".join(texts(page._body(args, admin)))
    assert "Mark a report" in as_admin and "undo" in as_admin
    as_reader = " ".join(texts(page._body(args, reader)))
    assert "needs an admin token" in as_reader and "undo" not in as_reader
    assert "upgrade — test-admin-" in as_reader  # everyone sees the mark

    assert marks.change_mark(session, admin, ids[3], "step", None) == (
        f"report #{ids[3]}: step mark removed")
    session.commit()
    assert marks.report_marks(session, ids[3]) == []
