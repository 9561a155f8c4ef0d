"""HTTP as clients and proxies expect it, in-process on both databases: a report's ETag
and 304, Cache-Control, gzip above a size, a full Allow on 405 and OPTIONS, HEAD for every
GET, 415 for a body not declared JSON, CORS off by default and configurable."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from api_helpers import REPORTS, error_detail, small_report
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.main import create_app
from app.repository import alerts as alerts_repo

Auth = Callable[[str], dict[str, str]]
Body = dict[str, Any]


@pytest.fixture
def report_id(client: TestClient, auth: Auth, reference: Body) -> int:
    response = client.post(REPORTS, json=small_report(reference, 60), headers=auth("ingest"))
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def _reads(report_id: int, case_id: str) -> list[str]:
    """The reads of one report, each tagged with the report's version."""
    base = f"{REPORTS}/{report_id}"
    return [base, f"{base}/cases", f"{base}/cases?precision=bf16&sort=layerMS",
            f"{base}/cases/{case_id}", f"{base}/report.json"]


def test_report_reads_carry_the_version_and_answer_304(
    client: TestClient, auth: Auth, reference: Body, report_id: int
) -> None:
    urls = _reads(report_id, reference["cases"][0]["id"])
    tags = {}
    for url in urls:
        first = client.get(url)
        assert first.status_code == 200, (url, first.text)
        etag = first.headers["etag"]
        assert etag.startswith('W/"') and etag.endswith('"'), etag
        assert first.headers["cache-control"] == "no-cache"
        assert client.get(url).headers["etag"] == etag  # stable while nothing changes
        tags[url] = etag

        held = client.get(url, headers={"If-None-Match": etag})
        assert held.status_code == 304, (url, held.text)
        assert held.content == b""
        assert held.headers["etag"] == etag
        assert held.headers["cache-control"] == "no-cache"
        # Any of a list, the strong form of the same tag, or "*" matches too.
        strong = etag.removeprefix("W/")
        for header in (f'"other", {etag}', strong, "*"):
            assert client.get(url, headers={"If-None-Match": header}).status_code == 304
        assert client.get(url, headers={"If-None-Match": '"other"'}).status_code == 200
    # Every read of one report names one version: the report's, not the answer's bytes.
    assert len(set(tags.values())) == 1

    appended = client.post(f"{REPORTS}/{report_id}/cases",
                           json={"cases": reference["cases"][60:61]}, headers=auth("ingest"))
    assert appended.status_code == 200, appended.text
    for url in urls:
        stale = client.get(url, headers={"If-None-Match": tags[url]})
        assert stale.status_code == 200, url
        assert stale.headers["etag"] != tags[url]
    assert len(client.get(f"{REPORTS}/{report_id}/report.json").json()["cases"]) == 61


def test_304_only_after_the_read_check(
    engine: Any, settings_env: Callable[..., None], auth: Auth, reference: Body
) -> None:
    settings_env(require_read_token="1")
    with TestClient(create_app()) as client:
        created = client.post(REPORTS, json=small_report(reference, 2), headers=auth("ingest"))
        url = f"{REPORTS}/{created.json()['id']}"
        read = auth("read")
        first = client.get(url, headers=read)
        assert first.headers["cache-control"] == "private, no-cache"
        etag = first.headers["etag"]
        error_detail(client.get(url, headers={"If-None-Match": etag}), 401, "unauthorized")
        assert client.get(url, headers={**read, "If-None-Match": etag}).status_code == 304


def test_other_reads_say_cache_control(
    client: TestClient, report_id: int, reference: Body
) -> None:
    case_id = reference["cases"][0]["id"]
    gpu = reference["meta"]["gpu"]
    for url in (REPORTS, f"{REPORTS}/{report_id}/regressions",
                f"/api/v1/history?caseId={case_id}&gpu={gpu}",
                f"{REPORTS}/{report_id}/export.html"):
        response = client.get(url)
        assert response.status_code == 200, (url, response.text)
        assert response.headers["cache-control"] == "no-cache", url
        assert "etag" not in response.headers, url
    assert "etag" not in client.get(REPORTS).headers


def _raw(client: TestClient, url: str, encoding: str) -> tuple[dict[str, str], bytes]:
    with client.stream("GET", url, headers={"Accept-Encoding": encoding}) as response:
        assert response.status_code == 200, url
        return dict(response.headers), b"".join(response.iter_raw())


def test_gzip_above_a_size(client: TestClient, report_id: int) -> None:
    url = f"{REPORTS}/{report_id}/cases"
    headers, plain = _raw(client, url, "identity")
    assert "content-encoding" not in headers
    zipped_headers, zipped = _raw(client, url, "gzip")
    assert zipped_headers["content-encoding"] == "gzip"
    assert "accept-encoding" in zipped_headers["vary"].lower()
    assert int(zipped_headers["content-length"]) == len(zipped)
    assert gzip.decompress(zipped) == plain
    assert len(zipped) < len(plain) / 3, (len(zipped), len(plain))
    assert zipped_headers["etag"] == headers["etag"]  # weak: the same version either way

    # Small answers go as they are: compressing ~20 bytes only adds the gzip header.
    small_headers, small = _raw(client, "/healthz", "gzip")
    assert "content-encoding" not in small_headers
    assert json.loads(small) == {"status": "ok"}


def test_405_names_every_method_and_options_answers(client: TestClient, report_id: int) -> None:
    expected = {
        REPORTS: "GET, HEAD, OPTIONS, POST",
        f"{REPORTS}/{report_id}": "DELETE, GET, HEAD, OPTIONS",
        f"{REPORTS}/{report_id}/cases": "GET, HEAD, OPTIONS, POST",
        "/healthz": "GET, HEAD, OPTIONS",
    }
    for url, allow in expected.items():
        response = client.request("PATCH", url)
        detail = error_detail(response, 405, "method_not_allowed")
        assert response.headers["allow"] == allow, url
        assert "PATCH" in detail and allow in detail
        options = client.options(url)
        assert options.status_code == 204, url
        assert options.headers["allow"] == allow
        assert options.content == b""
    response = client.put(f"{REPORTS}/{report_id}/report.json")
    assert response.headers["allow"] == "GET, HEAD, OPTIONS"


def _an_alert(session: Session, report_id: int, case_id: str) -> int:
    """An alert on the report, stored as ingest stores one (a step takes a series of
    reports to show: tests/test_alerts.py opens real ones)."""
    alert_id = alerts_repo.insert_alert(session, alerts_repo.NewAlert(
        report_id=report_id, gpu="g", series="s", metric="layerMS", direction="regression",
        phase=None, change_min_percent=5.0, change_max_percent=5.0, phase_min_percent=None,
        phase_max_percent=None, gpu_state_changes=[], provenance_changes=[],
        last_good_report_id=None, first_bad_report_id=report_id, why="why",
        cases=[alerts_repo.AlertCase(case_id, 5.0, None)]))
    session.commit()
    return alert_id


def test_head_for_every_get(
    client: TestClient, report_id: int, reference: Body, session: Session
) -> None:
    case = reference["cases"][0]
    values = {"report_id": str(report_id), "case_id": case["id"], "caseId": case["id"],
              "gpu": reference["meta"]["gpu"], "base": str(report_id), "head": str(report_id),
              "reports": str(report_id),
              "alert_id": str(_an_alert(session, report_id, case["id"]))}
    spec = client.get("/openapi.json").json()
    urls = []
    for path, operations in spec["paths"].items():
        if "get" not in operations:
            continue
        required = [p["name"] for p in operations["get"].get("parameters", [])
                    if p.get("required") and p["in"] == "query"]
        url = path.format(**values)
        if required:
            url += "?" + "&".join(f"{name}={values[name]}" for name in required)
        urls.append(url)
    assert len(urls) >= 10, urls
    for url in [*urls, "/", f"/reports/{report_id}", "/openapi.json", "/docs"]:
        got = client.get(url, headers={"Accept-Encoding": "identity"})
        head = client.head(url, headers={"Accept-Encoding": "identity"})
        assert got.status_code == 200, (url, got.text[:200])
        assert head.status_code == 200, url
        assert head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"], url
        assert int(head.headers["content-length"]) == len(got.content), url
        assert head.headers.get("etag") == got.headers.get("etag"), url
    assert client.head(f"{REPORTS}/999").status_code == 404


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x"])
def test_a_body_not_declared_json_is_415(
    client: TestClient, auth: Auth, reference: Body, content_type: str | None
) -> None:
    headers = auth("ingest")
    if content_type is not None:
        headers["Content-Type"] = content_type
    body = json.dumps(small_report(reference, 1)).encode()
    for url in (REPORTS, f"{REPORTS}/1/cases"):
        response = client.post(url, content=body, headers=headers)
        detail = error_detail(response, 415, "unsupported_media_type")
        assert "application/json" in detail
        assert (content_type or "no Content-Type") in detail
    assert client.get(REPORTS).json()["total"] == 0


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8",
                                          "Application/JSON", "application/report+json"])
def test_json_media_types_are_accepted(
    client: TestClient, auth: Auth, reference: Body, content_type: str
) -> None:
    response = client.post(REPORTS, content=json.dumps(small_report(reference, 1)).encode(),
                           headers={**auth("ingest"), "Content-Type": content_type})
    assert response.status_code == 201, response.text


def test_cors_is_off_by_default(client: TestClient) -> None:
    origin = {"Origin": "https://notebook.example"}
    response = client.get(REPORTS, headers=origin)
    assert response.status_code == 200
    assert not any(h.startswith("access-control-") for h in response.headers)
    preflight = client.options(REPORTS, headers={
        **origin, "Access-Control-Request-Method": "GET"})
    assert not any(h.startswith("access-control-") for h in preflight.headers)


@pytest.fixture
def cors_client(engine: Any, settings_env: Callable[..., None]) -> Iterator[TestClient]:
    settings_env(cors_origins="https://notebook.example, https://grafana.example")
    with TestClient(create_app()) as client:
        yield client


def test_cors_for_the_configured_origins(
    cors_client: TestClient, auth: Auth, reference: Body
) -> None:
    client = cors_client
    allowed = {"Origin": "https://grafana.example"}
    response = client.get(REPORTS, headers=allowed)
    assert response.headers["access-control-allow-origin"] == "https://grafana.example"
    assert "ETag" in response.headers["access-control-expose-headers"]

    preflight = client.options(REPORTS, headers={
        **allowed, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status_code == 200, preflight.text
    assert "POST" in preflight.headers["access-control-allow-methods"]
    # Errors carry it too, or a browser hides the reason from the page.
    refused = client.post(REPORTS, json={}, headers=allowed)
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == "https://grafana.example"

    other = client.get(REPORTS, headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers
    denied = client.options(REPORTS, headers={"Origin": "https://evil.example",
                                              "Access-Control-Request-Method": "GET"})
    assert denied.status_code == 400
