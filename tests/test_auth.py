"""The auth matrix for every write route: no token, a malformed header, an unknown or a
revoked token -> 401 with one body for all; the wrong scope -> 403; the right scope (or
a wider one) -> success. Nothing is written on a refusal. Tokens are stored hashed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from api_helpers import REPORTS, error_detail, row_counts, small_report
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.repository import tokens

Auth = Callable[[str], dict[str, str]]
Body = dict[str, Any]


def _new_report(reference: Body) -> Body:
    body = small_report(reference, 1)
    body["meta"]["source"] = "a different report"
    return body


@dataclass(frozen=True)
class Route:
    needs: str  # the narrowest scope that may call it
    call: Callable[[TestClient, int, dict[str, str], Body], Response]
    ok: int


ROUTES = {
    "post_report": Route(
        "ingest", lambda c, rid, h, ref: c.post(REPORTS, json=_new_report(ref), headers=h), 201),
    "append_cases": Route(
        "ingest",
        lambda c, rid, h, ref: c.post(f"{REPORTS}/{rid}/cases", headers=h,
                                      json={"cases": [{**ref["cases"][7], "id": "appended"}]}),
        200),
    "delete_report": Route(
        "admin", lambda c, rid, h, ref: c.delete(f"{REPORTS}/{rid}", headers=h), 204),
}


@pytest.fixture
def report_id(client: TestClient, auth: Auth, reference: Body) -> int:
    response = client.post(REPORTS, json=small_report(reference, 2), headers=auth("ingest"))
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


@pytest.fixture
def revoked(token_for: Callable[[str], str], session: Session) -> str:
    token = token_for("admin")
    row = tokens.find_active(session, token)
    assert row is not None
    tokens.revoke_token(session, str(row.id))
    session.commit()
    return token


@pytest.mark.parametrize("route", list(ROUTES))
def test_refused_without_a_valid_token(
    route: str, client: TestClient, report_id: int, revoked: str, session: Session,
    reference: Body,
) -> None:
    call = ROUTES[route].call
    counts = row_counts(session)
    bad_headers: list[dict[str, str]] = [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer "},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Token msc_abc"},
        {"Authorization": "msc_abc"},
        {"Authorization": "Bearer msc_unknown-token"},
        {"Authorization": "Bearer " + "x" * 5000},
        {"Authorization": f"Bearer {revoked}"},
        {"Authorization": f"Bearer {revoked}x"},
    ]
    bodies = set()
    for headers in bad_headers:
        response = call(client, report_id, headers, reference)
        error_detail(response, 401, "unauthorized")
        assert response.headers["www-authenticate"] == "Bearer", headers
        bodies.add(response.content)
    assert len(bodies) == 1, bodies  # nothing tells a revoked token from an unknown one
    assert row_counts(session) == counts


@pytest.mark.parametrize("route", list(ROUTES))
def test_wrong_scope_is_403(
    route: str, client: TestClient, auth: Auth, report_id: int, session: Session,
    reference: Body,
) -> None:
    spec = ROUTES[route]
    counts = row_counts(session)
    narrower = ["read"] if spec.needs == "ingest" else ["read", "ingest"]
    for scope in narrower:
        response = spec.call(client, report_id, auth(scope), reference)
        detail = error_detail(response, 403, "forbidden")
        assert repr(scope) in detail and repr(spec.needs) in detail
    assert row_counts(session) == counts


@pytest.mark.parametrize(("route", "scope"), [
    ("post_report", "ingest"), ("post_report", "admin"),
    ("append_cases", "ingest"), ("append_cases", "admin"),
    ("delete_report", "admin"),
])
def test_right_scope_succeeds(
    route: str, scope: str, client: TestClient, auth: Auth, report_id: int, session: Session,
    reference: Body,
) -> None:
    spec = ROUTES[route]
    reports, cases, _ = row_counts(session)
    response = spec.call(client, report_id, auth(scope), reference)
    assert response.status_code == spec.ok, response.text
    after = row_counts(session)[:2]
    if route == "post_report":
        assert after == (reports + 1, cases + 1)
    elif route == "append_cases":
        assert after == (reports, cases + 1)
    else:
        assert after == (0, 0)


def test_lowercase_bearer_scheme_is_accepted(
    client: TestClient, token_for: Callable[[str], str], reference: Body
) -> None:
    response = client.post(REPORTS, json=_new_report(reference),
                           headers={"Authorization": f"bearer {token_for('ingest')}"})
    assert response.status_code == 201, response.text


def test_tokens_are_stored_only_as_a_hash(
    token_for: Callable[[str], str], session: Session
) -> None:
    token = token_for("ingest")
    assert token.startswith("msc_") and len(token) > 40
    rows = session.execute(text("SELECT * FROM api_tokens")).mappings().all()
    assert len(rows) == 1
    stored = " ".join(str(value) for value in rows[0].values())
    assert token not in stored
    assert token[len("msc_"):] not in stored
    assert rows[0]["token_sha256"] == tokens.hash_token(token) != token
    assert len(str(rows[0]["prefix"])) < len(token) // 3  # only a short prefix, to recognise it


def test_revoked_token_is_refused_at_once(
    client: TestClient, token_for: Callable[[str], str], session: Session, reference: Body
) -> None:
    token = token_for("ingest")
    headers = {"Authorization": f"Bearer {token}"}
    assert client.post(REPORTS, json=_new_report(reference), headers=headers).status_code == 201
    row = tokens.find_active(session, token)
    assert row is not None
    tokens.revoke_token(session, row.name)
    session.commit()
    error_detail(client.post(REPORTS, json=small_report(reference, 3), headers=headers), 401)
    assert tokens.find_active(session, token) is None
    assert tokens.scope_allows("admin", "ingest") and tokens.scope_allows("ingest", "read")
    assert not tokens.scope_allows("ingest", "admin") and not tokens.scope_allows("read", "ingest")


def test_the_bearer_header_wins_over_the_cookie() -> None:
    from app.services.auth import presented_token

    assert presented_token("Bearer msc_a", "msc_b") == "msc_a"
    assert presented_token("bearer  msc_a ", None) == "msc_a"
    # Not a bearer header (or an empty one): the sign-in cookie, if any, is the token.
    assert presented_token("Basic dXNlcg==", "msc_b") == "msc_b"
    assert presented_token("Bearer ", "msc_b") == "msc_b"
    assert presented_token(None, "") is None
