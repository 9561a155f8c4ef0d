"""The HTTP API in-process, on both databases: idempotent ingest, appends, listing,
filters and sorting, delete, limits, read tokens, health, OpenAPI, the error shape."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from api_helpers import REPORTS, error_detail, row_counts, small_report
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.case_fields import DERIVED
from app.core.config import get_settings
from app.main import create_app
from db.migrate import head_revision

Auth = Callable[[str], dict[str, str]]
Body = dict[str, Any]


def _post(client: TestClient, body: Body, headers: dict[str, str]) -> Body:
    response = client.post(REPORTS, json=body, headers=headers)
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


# --- idempotent ingest ----------------------------------------------------------------


def test_same_report_again_is_the_same_report(
    client: TestClient, auth: Auth, reference: Body, session: Session
) -> None:
    headers = auth("ingest")
    first = client.post(REPORTS, json=reference, headers=headers)
    assert first.status_code == 201
    assert first.headers["location"] == f"{REPORTS}/{first.json()['id']}"
    counts = row_counts(session)
    assert counts[:2] == (1, 63)

    # Same content, other key order and spacing: the canonical content is what counts.
    again = client.post(REPORTS, content=json.dumps(reference, indent=2, sort_keys=True),
                        headers={**headers, "Content-Type": "application/json"})
    assert again.status_code == 200, again.text
    assert again.json() == {"id": first.json()["id"], "caseCount": 63, "created": False}
    assert row_counts(session) == counts
    assert client.get(REPORTS).json()["total"] == 1


def test_same_run_id_other_content_is_the_same_report(
    client: TestClient, auth: Auth, reference: Body, session: Session
) -> None:
    headers = auth("ingest")
    body = small_report(reference, 2)
    body["meta"]["runId"] = "run-42"
    first = _post(client, body, headers)
    assert first["created"] is True

    # A runner resending its run with a different source and one more case.
    resend = small_report(reference, 3)
    resend["meta"]["runId"] = "run-42"
    resend["meta"]["source"] = "resent"
    response = client.post(REPORTS, json=resend, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json() == {"id": first["id"], "caseCount": 3, "created": False}
    assert row_counts(session)[:2] == (1, 3)
    detail = client.get(f"{REPORTS}/{first['id']}").json()
    assert detail["meta"]["source"] == reference["meta"]["source"]  # the first meta stays

    # The same run id with a case whose content changed: a conflict, nothing changes.
    conflicting = small_report(reference, 3)
    conflicting["meta"]["runId"] = "run-42"
    conflicting["cases"][0]["layerMS"] = 99.0
    response = client.post(REPORTS, json=conflicting, headers=headers)
    error_detail(response, 409, "conflict")
    assert row_counts(session)[:2] == (1, 3)
    case_id = reference["cases"][0]["id"]
    case = client.get(f"{REPORTS}/{first['id']}/cases/{case_id}").json()
    assert case["layerMS"] == reference["cases"][0]["layerMS"]


def test_case_pages_follow_appends(client: TestClient, auth: Auth, reference: Body) -> None:
    """The case list, whole and filtered, read again after each append: every answer holds
    the cases stored at that moment, in order, under a new ETag each time."""
    headers = auth("ingest")
    report_id = _post(client, small_report(reference, 60), headers)["id"]
    cases_path = f"{REPORTS}/{report_id}/cases"
    precision = reference["cases"][0]["precision"]
    etags = set()
    for before, stored in ((60, 60), (60, 62), (62, 63)):
        if stored > before:
            added = client.post(cases_path, headers=headers,
                                json={"cases": reference["cases"][before:stored]})
            assert added.json()["caseCount"] == stored, added.text
        for _ in range(2):  # the second read is served as the first was read
            whole = client.get(cases_path)
            assert [c["id"] for c in whole.json()["items"]] == \
                [c["id"] for c in reference["cases"][:stored]]
            assert whole.json()["total"] == stored
            matching = client.get(cases_path, params={"precision": precision})
            assert [c["id"] for c in matching.json()["items"]] == \
                [c["id"] for c in reference["cases"][:stored] if c["precision"] == precision]
        etags.add(whole.headers["etag"])
    assert len(etags) == 3


def test_streamed_report_posted_whole_is_the_same_report(
    client: TestClient, auth: Auth, reference: Body, session: Session
) -> None:
    """60 cases posted, 3 appended, then the complete file (no runId) posted: the report
    as it stands after the appends is the same content, so the same report."""
    headers = auth("ingest")
    assert "runId" not in reference["meta"]
    first = client.post(REPORTS, json=small_report(reference, 60), headers=headers)
    assert first.status_code == 201, first.text
    report_id = first.json()["id"]
    appended = client.post(f"{REPORTS}/{report_id}/cases",
                           json={"cases": reference["cases"][60:63]}, headers=headers)
    assert appended.json()["caseCount"] == 63, appended.text
    counts = row_counts(session)
    assert counts[:2] == (1, 63)

    whole = client.post(REPORTS, json=reference, headers=headers)
    assert whole.status_code == 200, whole.text
    assert whole.json() == {"id": report_id, "caseCount": 63, "created": False}
    assert whole.headers["location"] == f"{REPORTS}/{report_id}"
    # What report.json gives back, posted again, is that report too.
    again = client.post(REPORTS, content=client.get(f"{REPORTS}/{report_id}/report.json").content,
                        headers={**headers, "Content-Type": "application/json"})
    assert (again.status_code, again.json()["id"]) == (200, report_id)
    # The first 60 as first posted are still that report.
    assert client.post(REPORTS, json=small_report(reference, 60),
                       headers=headers).json()["id"] == report_id
    assert row_counts(session) == counts

    # Not the same content: the 63 cases in another order, or one number changed.
    reordered = copy.deepcopy(reference)
    reordered["cases"].reverse()
    changed = copy.deepcopy(reference)
    changed["cases"][62]["layerMS"] += 1e-9
    for body in (reordered, changed):
        response = client.post(REPORTS, json=body, headers=headers)
        assert response.status_code == 201, response.text
        assert response.json()["id"] != report_id
    assert row_counts(session)[:2] == (3, 63 * 3)


def test_different_reports_are_different(client: TestClient, auth: Auth, reference: Body) -> None:
    headers = auth("ingest")
    body = small_report(reference, 2)
    a = _post(client, body, headers)
    body["cases"][1]["layerMS"] += 1e-9
    b = _post(client, body, headers)
    assert a["created"] and b["created"] and a["id"] != b["id"]


# --- appending cases ------------------------------------------------------------------


def _renamed(cases: list[Body], prefix: str) -> list[Body]:
    return [{**case, "id": f"{prefix}-{i}"} for i, case in enumerate(cases)]


def test_append_cases(client: TestClient, auth: Auth, reference: Body, session: Session) -> None:
    headers = auth("ingest")
    created = _post(client, small_report(reference, 2), headers)
    url = f"{REPORTS}/{created['id']}/cases"
    new = _renamed(reference["cases"][40:43], "late")

    response = client.post(url, json={"cases": new[:2]}, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json() == {"id": created["id"], "caseCount": 4, "added": 2, "unchanged": 0}

    # One already stored (identical: a no-op) and one new.
    response = client.post(url, json={"cases": new[1:]}, headers=headers)
    assert response.json() == {"id": created["id"], "caseCount": 5, "added": 1, "unchanged": 1}
    response = client.post(url, json={"cases": new}, headers=headers)
    assert response.json() == {"id": created["id"], "caseCount": 5, "added": 0, "unchanged": 3}

    document = client.get(f"{REPORTS}/{created['id']}/report.json").json()
    assert document["cases"] == reference["cases"][:2] + new  # in arrival order
    assert row_counts(session)[:2] == (1, 5)
    case = client.get(f"{REPORTS}/{created['id']}/cases/late-2").json()
    assert case["percentOfPeak"] == pytest.approx(new[2]["usefulTFPerGPU"] / 2500 * 100)
    listed = client.get(REPORTS).json()["items"][0]
    assert listed["caseCount"] == 5


def test_append_conflict_changes_nothing(
    client: TestClient, auth: Auth, reference: Body, session: Session
) -> None:
    headers = auth("ingest")
    created = _post(client, small_report(reference, 2), headers)
    url = f"{REPORTS}/{created['id']}/cases"
    before = client.get(f"{REPORTS}/{created['id']}/report.json").json()
    counts = row_counts(session)

    changed = {**reference["cases"][1], "layerMS": 123.0}
    brand_new = {**reference["cases"][5], "id": "brand-new"}
    response = client.post(url, json={"cases": [brand_new, changed]}, headers=headers)
    detail = error_detail(response, 409, "conflict")
    assert reference["cases"][1]["id"] in detail

    assert row_counts(session) == counts  # the new case of the batch was not kept either
    assert client.get(f"{REPORTS}/{created['id']}/report.json").json() == before
    assert client.get(f"{url}/brand-new").status_code == 404
    stored = client.get(f"{url}/{reference['cases'][1]['id']}").json()
    assert stored["layerMS"] == reference["cases"][1]["layerMS"]


def test_append_to_unknown_report(client: TestClient, auth: Auth, reference: Body) -> None:
    response = client.post(f"{REPORTS}/4242/cases", json={"cases": reference["cases"][:1]},
                           headers=auth("ingest"))
    assert "4242" in error_detail(response, 404, "not_found")


# --- listing reports ------------------------------------------------------------------


@pytest.fixture
def three_reports(client: TestClient, auth: Auth, reference: Body) -> list[int]:
    headers = auth("ingest")
    ids = []
    for gpu, source, run in (("NVIDIA H100 SXM", "lab A", "alpha-1"),
                             ("NVIDIA GB300", "lab B", "beta-2"),
                             ("AMD MI355X", "cluster C", None)):
        body = small_report(reference, 1)
        body["meta"].update(gpu=gpu, source=source)
        if run:
            body["meta"]["runId"] = run
        ids.append(int(_post(client, body, headers)["id"]))
    return ids


def test_reports_newest_first_and_paginated(client: TestClient, three_reports: list[int]) -> None:
    page = client.get(REPORTS).json()
    assert [r["id"] for r in page["items"]] == three_reports[::-1]
    assert page["total"] == 3 and page["limit"] == 20 and page["offset"] == 0
    first = page["items"][0]
    assert first["gpu"] == "AMD MI355X" and first["caseCount"] == 1 and first["runId"] is None

    page = client.get(REPORTS, params={"limit": 2}).json()
    assert [r["id"] for r in page["items"]] == three_reports[:0:-1]
    assert page["total"] == 3
    page = client.get(REPORTS, params={"limit": 2, "offset": 2}).json()
    assert [r["id"] for r in page["items"]] == three_reports[:1]
    assert client.get(REPORTS, params={"offset": 5}).json()["items"] == []
    error_detail(client.get(REPORTS, params={"limit": 0}), 422, "validation_error")
    error_detail(client.get(REPORTS, params={"offset": -1}), 422, "validation_error")


def test_reports_search(client: TestClient, three_reports: list[int]) -> None:
    def found(**params: str) -> list[int]:
        page = client.get(REPORTS, params=params).json()
        assert page["total"] == len(page["items"])
        return [r["id"] for r in page["items"]]

    h100, gb300, mi355 = three_reports
    assert found(q="h100") == [h100]  # case-insensitive, GPU
    assert found(q="NVIDIA") == [gb300, h100]
    assert found(q="cluster") == [mi355]  # source
    assert found(q="beta") == [gb300]  # run id
    assert found(q="nothing-like-this") == []
    # LIKE wildcards in the search text are literal characters.
    assert found(q="%") == [] and found(q="_") == [] and found(q="lab_a") == []
    detail = error_detail(client.get(REPORTS, params={"q": "x" * 201}), 422)
    assert detail[0]["path"] == "q" and "200 characters" in detail[0]["msg"]
    assert found(gpu="AMD MI355X") == [mi355]


def test_page_size_over_the_maximum_is_422_and_declared(
    engine: Any, settings_env: Callable[..., None], auth: Auth, reference: Body
) -> None:
    settings_env(page_size_max=2)
    with TestClient(create_app()) as client:
        headers = auth("ingest")
        for source in ("a", "b", "c"):
            body = small_report(reference, 1)
            body["meta"]["source"] = source
            _post(client, body, headers)
        # Not silently capped: the client learns the maximum, named with its setting.
        detail = error_detail(client.get(REPORTS, params={"limit": 3}), 422, "validation_error")
        assert [(p["loc"], p["path"]) for p in detail] == [(["query", "limit"], "limit")]
        assert "less than or equal to 2" in detail[0]["msg"]
        assert "MOESCOPE_PAGE_SIZE_MAX" in detail[0]["msg"]
        page = client.get(REPORTS, params={"limit": 2}).json()
        assert len(page["items"]) == 2 and page["limit"] == 2 and page["total"] == 3
        spec = client.get("/openapi.json").json()
        limit = next(p for p in spec["paths"][REPORTS]["get"]["parameters"]
                     if p["name"] == "limit")
        assert limit["schema"]["maximum"] == 2 and limit["schema"]["minimum"] == 1


# --- reading cases --------------------------------------------------------------------


@pytest.fixture
def reference_id(client: TestClient, auth: Auth, reference: Body) -> int:
    return int(_post(client, reference, auth("ingest"))["id"])


def test_case_filters_and_report_summary(
    client: TestClient, reference_id: int, reference: Body
) -> None:
    cases = reference["cases"]
    url = f"{REPORTS}/{reference_id}/cases"
    checks: list[tuple[list[tuple[str, Any]], Callable[[Body], bool]]] = [
        ([], lambda c: True),
        ([("mode", "training")], lambda c: c["mode"] == "training"),
        ([("ep", 16)], lambda c: c["ep"] == 16),
        ([("ep", 8), ("ep", 64)], lambda c: c["ep"] in (8, 64)),  # repeated: any of
        ([("precision", "nvfp4")], lambda c: c["precision"] == "nvfp4"),
        ([("pipeline", "staged"), ("pipeline", "mega")], lambda c: c["pipeline"] != "standard"),
        ([("category", "width")], lambda c: c["category"] == "width"),
        ([("F", 1536), ("F", 6144)], lambda c: c["F"] in (1536, 6144)),
        ([("imbalance", 4)], lambda c: c["imbalance"] == 4.0),
        ([("imbalance", 8.0), ("mode", "inference"), ("precision", "bf16")],
         lambda c: c["imbalance"] == 8 and c["mode"] == "inference" and c["precision"] == "bf16"),
        ([("precision", "fp64")], lambda c: False),
    ]
    for params, keep in checks:
        page = client.get(url, params=params).json()
        expected = [c["id"] for c in cases if keep(c)]
        assert [c["id"] for c in page["items"]] == expected, params
        assert page["total"] == len(expected), params
    error_detail(client.get(url, params={"mode": "serving"}), 422, "validation_error")
    error_detail(client.get(url, params={"ep": "eight"}), 422, "validation_error")

    detail = client.get(f"{REPORTS}/{reference_id}").json()
    assert detail["meta"] == reference["meta"]
    assert detail["caseCount"] == 63
    assert detail["gpu"] == reference["meta"]["gpu"]
    summary = detail["summary"]
    assert summary["ep"] == sorted({c["ep"] for c in cases}) == [8, 16, 32, 64]
    assert summary["precision"] == ["bf16", "mxfp8", "nvfp4"]
    assert summary["imbalance"] == [1.0, 4.0, 8.0]
    peaks = reference["meta"]["theoreticalTFPerGPU"]
    best = max(c["usefulTFPerGPU"] / peaks[c["precision"]] * 100 for c in cases)
    assert detail["bestPercentOfPeak"] == pytest.approx(best, rel=1e-12)


def test_case_sorting_and_limits(client: TestClient, reference_id: int, reference: Body) -> None:
    cases = reference["cases"]
    url = f"{REPORTS}/{reference_id}/cases"

    def ids(**params: Any) -> list[str]:
        response = client.get(url, params=params)
        assert response.status_code == 200, response.text
        return [c["id"] for c in response.json()["items"]]

    by_useful = sorted(cases, key=lambda c: c["usefulTFPerGPU"])
    assert ids(sort="usefulTFPerGPU") == [c["id"] for c in by_useful]
    assert ids(sort="usefulTFPerGPU", order="desc") == [c["id"] for c in by_useful[::-1]]
    # Ties on ep keep the report's order.
    assert ids(sort="ep", order="desc") == [
        c["id"] for c in sorted(cases, key=lambda c: -c["ep"])
    ]
    peaks = reference["meta"]["theoreticalTFPerGPU"]
    by_percent = sorted(cases, key=lambda c: -c["usefulTFPerGPU"] / peaks[c["precision"]])
    assert ids(sort="percentOfPeak", order="desc", limit=5) == [c["id"] for c in by_percent[:5]]

    page = client.get(url, params={"limit": 10, "offset": 60}).json()
    assert [c["id"] for c in page["items"]] == [c["id"] for c in cases[60:]]
    assert page["total"] == 63 and page["limit"] == 10 and page["offset"] == 60
    assert len(client.get(url, params={"limit": 1000}).json()["items"]) == 63
    for bad in ({"limit": 1001}, {"limit": 0}, {"sort": "bogus"}, {"order": "up"}):
        detail = error_detail(client.get(url, params=bad), 422, "validation_error")
        assert detail[0]["loc"][0] == "query" and detail[0]["path"] in bad


def test_sort_puts_nulls_last_both_ways(client: TestClient, auth: Auth, reference: Body) -> None:
    body = small_report(reference, 4)
    body["cases"][0]["nvlinkTXGBps"] = None
    body["cases"][2]["nvlinkTXGBps"] = None
    body["cases"][3]["nvlinkTXGBps"] = 1.0
    report_id = _post(client, body, auth("ingest"))["id"]
    url = f"{REPORTS}/{report_id}/cases"
    c = [case["id"] for case in body["cases"]]

    def ids(order: str) -> list[str]:
        page = client.get(url, params={"sort": "nvlinkTXGBps", "order": order}).json()
        return [case["id"] for case in page["items"]]

    assert ids("asc") == [c[3], c[1], c[0], c[2]]
    assert ids("desc") == [c[1], c[3], c[0], c[2]]


def test_case_and_report_not_found(client: TestClient, auth: Auth, reference: Body) -> None:
    reference_id = _post(client, small_report(reference, 1), auth("ingest"))["id"]
    assert "no case" in error_detail(
        client.get(f"{REPORTS}/{reference_id}/cases/no-such-case"), 404, "not_found")
    for url in (f"{REPORTS}/999", f"{REPORTS}/999/cases", f"{REPORTS}/999/cases/x",
                f"{REPORTS}/999/report.json"):
        assert "999" in error_detail(client.get(url), 404, "not_found")


# --- delete ---------------------------------------------------------------------------


def test_delete_removes_report_and_cases(
    client: TestClient, auth: Auth, reference: Body, session: Session
) -> None:
    headers = auth("ingest")
    keep = _post(client, small_report(reference, 1), headers)["id"]
    gone = _post(client, small_report(reference, 3), headers)["id"]
    assert row_counts(session)[:2] == (2, 4)

    response = client.delete(f"{REPORTS}/{gone}", headers=auth("admin"))
    assert response.status_code == 204 and response.content == b""
    error_detail(client.get(f"{REPORTS}/{gone}/report.json"), 404, "not_found")
    error_detail(client.get(f"{REPORTS}/{gone}"), 404, "not_found")
    assert row_counts(session)[:2] == (1, 1)
    assert [r["id"] for r in client.get(REPORTS).json()["items"]] == [keep]
    error_detail(client.delete(f"{REPORTS}/{gone}", headers=auth("admin")), 404, "not_found")
    # Deleted, it can be posted again as a new report.
    again = client.post(REPORTS, json=small_report(reference, 3), headers=headers)
    assert again.status_code == 201 and again.json()["created"] is True
    assert again.json()["id"] > gone  # ids are never reused (SQLite too)


# --- body size limit ------------------------------------------------------------------


@pytest.fixture
def small_limit_client(
    engine: Any, settings_env: Callable[..., None]
) -> Iterator[TestClient]:
    settings_env(max_body_mb=0.05)  # 52,428 bytes; the reference is about 109 KB
    with TestClient(create_app()) as client:
        yield client


def test_body_over_the_limit_is_413(
    small_limit_client: TestClient, auth: Auth, reference: Body, session: Session
) -> None:
    client = small_limit_client
    headers = {**auth("ingest"), "Content-Type": "application/json"}
    body = json.dumps(reference).encode()
    assert len(body) > 0.05 * 2**20

    declared = client.post(REPORTS, content=body, headers=headers)
    assert "MiB" in error_detail(declared, 413, "payload_too_large")

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 8192):
            yield body[start:start + 8192]

    streamed = client.post(REPORTS, content=chunks(), headers=headers)
    assert "content-length" not in streamed.request.headers
    assert streamed.request.headers["transfer-encoding"] == "chunked"
    error_detail(streamed, 413, "payload_too_large")

    appended = client.post(f"{REPORTS}/1/cases", content=chunks(), headers=headers)
    error_detail(appended, 413, "payload_too_large")
    assert row_counts(session) == (0, 0, 0)

    # Under the limit, streamed or not, a report goes in.
    small = json.dumps(small_report(reference, 2)).encode()
    assert client.post(REPORTS, content=iter([small[:100], small[100:]]),
                       headers=headers).status_code == 201


# --- read tokens, health, OpenAPI -----------------------------------------------------


def test_reads_closed_by_require_read_token(
    engine: Any, settings_env: Callable[..., None], auth: Auth, reference: Body
) -> None:
    settings_env(require_read_token=1)
    with TestClient(create_app()) as client:
        report_id = _post(client, small_report(reference, 1), auth("ingest"))["id"]
        case_id = reference["cases"][0]["id"]
        urls = [REPORTS, f"{REPORTS}/{report_id}", f"{REPORTS}/{report_id}/cases",
                f"{REPORTS}/{report_id}/cases/{case_id}", f"{REPORTS}/{report_id}/report.json"]
        bodies = set()
        tokens = {scope: auth(scope) for scope in ("read", "ingest", "admin")}
        for url in urls:
            response = client.get(url)
            error_detail(response, 401, "unauthorized")
            assert response.headers["www-authenticate"] == "Bearer"
            bodies.add(response.content)
            bad = client.get(url, headers={"Authorization": "Bearer msc_not-a-token"})
            bodies.add(bad.content)
            for scope, headers in tokens.items():
                assert client.get(url, headers=headers).status_code == 200, (url, scope)
        assert len(bodies) == 1
        assert client.get("/healthz").status_code == 200


def test_reads_open_by_default(client: TestClient, auth: Auth, reference: Body) -> None:
    report_id = _post(client, small_report(reference, 1), auth("ingest"))["id"]
    assert client.get(f"{REPORTS}/{report_id}").status_code == 200
    assert client.get(f"{REPORTS}/{report_id}/report.json").status_code == 200
    assert client.get(REPORTS).status_code == 200


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "revision": head_revision()}


def test_openapi_documents_the_request_bodies(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    post = spec["paths"]["/api/v1/reports"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Report"}
    append = spec["paths"]["/api/v1/reports/{report_id}/cases"]["post"]
    assert append["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/CaseList"}
    schemas = spec["components"]["schemas"]
    assert {"Report", "Meta", "Case", "Windows", "Shape", "CaseList"} <= set(schemas)
    assert {"meta", "cases"} <= set(schemas["Report"]["required"])
    assert "layerMS" in schemas["Case"]["properties"]
    assert {"401", "403", "413", "422"} <= set(post["responses"])
    assert "delete" in spec["paths"]["/api/v1/reports/{report_id}"]
    assert client.get("/docs").status_code == 200


def test_every_error_has_the_shared_shape(
    client: TestClient, auth: Auth, reference: Body
) -> None:
    ingest = auth("ingest")
    created = _post(client, small_report(reference, 1), ingest)
    changed = {**reference["cases"][0], "layerMS": 5.0}
    responses = [
        (client.get("/api/v1/no/such/route"), 404),
        (client.put(REPORTS), 405),
        (client.get(f"{REPORTS}/abc"), 422),
        (client.get(REPORTS, params={"limit": "x"}), 422),
        (client.post(REPORTS, json={}), 401),
        (client.post(REPORTS, json={}, headers=auth("read")), 403),
        (client.post(REPORTS, content=b"{",
                     headers={**ingest, "Content-Type": "application/json"}), 400),
        (client.post(REPORTS, content=b"{}", headers=ingest), 415),
        (client.post(REPORTS, content=b"{}", headers={**ingest, "Content-Type": "text/plain"}),
         415),
        (client.post(REPORTS, json={"meta": {}}, headers=ingest), 422),
        (client.post(f"{REPORTS}/{created['id']}/cases", json={"cases": [changed]},
                     headers=ingest), 409),
        (client.get(f"{REPORTS}/77"), 404),
        (client.delete(f"{REPORTS}/77", headers=auth("admin")), 404),
    ]
    for response, status in responses:
        error_detail(response, status)


def test_out_of_range_and_nul_parameters_are_422_not_500(
    client: TestClient, auth: Auth, reference: Body
) -> None:
    report_id = _post(client, small_report(reference, 1), auth("ingest"))["id"]
    cases = f"{REPORTS}/{report_id}/cases"
    huge = 10**20
    gets = [
        f"{REPORTS}/{2**31}", f"{REPORTS}/{huge}", f"{REPORTS}/{huge}/cases",
        f"{REPORTS}/{huge}/report.json", f"{REPORTS}/{huge}/cases/x", f"{REPORTS}?offset={huge}",
        f"{cases}?offset={huge}", f"{cases}?ep={2**31}", f"{cases}?F={huge}", f"{cases}?ep=0",
        f"{REPORTS}?q=a%00b", f"{REPORTS}?gpu=%00", f"{cases}?precision=%00",
        f"{cases}?pipeline=x&pipeline=%00", f"{cases}?category=%00", f"{cases}/a%00b",
    ]
    for url in gets:
        error_detail(client.get(url), 422, "validation_error")
    error_detail(client.delete(f"{REPORTS}/{huge}", headers=auth("admin")), 422)
    error_detail(client.post(f"{REPORTS}/{huge}/cases", json={"cases": reference["cases"][:1]},
                             headers=auth("ingest")), 422)
    # The largest values that fit are fine: nothing there.
    assert client.get(f"{REPORTS}?offset={2**63 - 1}").json()["items"] == []
    assert client.get(f"{cases}?ep={2**31 - 1}&F={2**63 - 1}").json()["total"] == 0
    error_detail(client.get(f"{REPORTS}/{2**31 - 1}"), 404, "not_found")


def test_case_ids_with_url_characters(client: TestClient, auth: Auth, reference: Body) -> None:
    from urllib.parse import quote

    body = small_report(reference, 3)
    ids = ["ep8/bf16", "a b?c=d#e", "100% ünï"]
    for case, case_id in zip(body["cases"], ids, strict=True):
        case["id"] = case_id
    report_id = _post(client, body, auth("ingest"))["id"]
    for case_id in ids:
        response = client.get(f"{REPORTS}/{report_id}/cases/{quote(case_id, safe='')}")
        assert response.status_code == 200, (case_id, response.text)
        assert response.json()["id"] == case_id


def test_readyz_is_503_on_a_database_without_migrations(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # Not through settings_env: that one is parametrized over both databases.
    monkeypatch.setenv("MOESCOPE_DATABASE_URL", f"sqlite:///{tmp_path / 'empty.db'}")
    get_settings.cache_clear()
    try:
        with TestClient(create_app()) as client:
            assert client.get("/healthz").status_code == 200
            detail = error_detail(client.get("/readyz"), 503, "database_not_migrated")
            assert "moescope db upgrade" in detail
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()


def test_unknown_wire_fields_pass_through_the_typed_answers(
    client: TestClient, auth: Auth, reference: Body
) -> None:
    """The typed answers declare the known fields; what a newer runner adds still comes
    back, in every answer that shows the case or the meta, and in report.json."""
    body = small_report(reference, 2)
    body["meta"]["futureNote"] = "a note this service does not know"
    body["cases"][1]["futureMetric"] = {"perRank": [1.5, 2.25]}
    body["toolVersion"] = "runner 9"
    created = _post(client, body, auth("ingest"))
    base = f"{REPORTS}/{created['id']}"
    case_id = body["cases"][1]["id"]

    one = client.get(f"{base}/cases/{case_id}").json()
    assert one["futureMetric"] == {"perRank": [1.5, 2.25]}
    listed = client.get(f"{base}/cases").json()["items"]
    assert [c.get("futureMetric") for c in listed] == [None, {"perRank": [1.5, 2.25]}]
    # Nothing added either: a field the case did not send stays out of its answer.
    assert set(listed[0]) == set(body["cases"][0]) | {f.wire for f in DERIVED} | {"caveats"}
    detail = client.get(base).json()
    assert detail["meta"] == body["meta"]
    assert client.get(f"{base}/report.json").json() == body
