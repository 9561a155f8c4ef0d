"""MOESCOPE_REQUIRE_READ_TOKEN=1 closes the dashboard as well as the API's reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from api_helpers import small_report
from fastapi.testclient import TestClient

from app.core.read_gate import login_page
from app.main import create_app
from app.services.auth import COOKIE

Auth = Callable[[str], dict[str, str]]
CALLBACK = {"output": "x.children", "outputs": {"id": "x", "property": "children"},
            "inputs": [], "changedPropIds": []}


def _gated_client(settings_env: Callable[..., None]) -> TestClient:
    settings_env(require_read_token=1)
    return TestClient(create_app(), follow_redirects=False)


def test_dashboard_needs_a_read_token(
    engine: Any, settings_env: Callable[..., None], token_for: Callable[[str], str],
    auth: Auth, reference: dict[str, Any],
) -> None:
    with _gated_client(settings_env) as client:
        report_id = client.post("/api/v1/reports", json=small_report(reference, 1),
                                headers=auth("ingest")).json()["id"]
        page = f"/reports/{report_id}?precision=bf16"

        # Pages send the browser to the sign-in form; callbacks (the data) get a 401.
        response = client.get(page)
        assert response.status_code == 303
        expected = f"/login?next=/reports/{report_id}%3Fprecision%3Dbf16"
        assert response.headers["location"] == expected
        callback = client.post("/_dash-update-component", json=CALLBACK)
        assert callback.status_code == 401
        assert callback.json()["error"] == "unauthorized"
        assert client.get("/_dash-layout").status_code == 401
        # Assets and the API's own open routes stay reachable.
        assert client.get("/healthz").status_code == 200
        assert client.get("/login").status_code == 200

        # A wrong token is refused on the form; a read token signs in with a cookie.
        wrong = client.post("/login", data={"token": "msc_nope", "next": page})
        assert wrong.status_code == 401 and "unknown, revoked" in wrong.text
        signed = client.post("/login", data={"token": token_for("read"), "next": page})
        assert signed.status_code == 303 and signed.headers["location"] == page
        set_cookie = signed.headers["set-cookie"]
        assert set_cookie.startswith(f"{COOKIE}=msc_")
        assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
        assert client.get(page).status_code == 200
        assert client.get("/_dash-layout").status_code == 200
        # The page's links to the API (report.json, the HTML export) take the cookie too.
        for link in (f"/api/v1/reports/{report_id}/report.json",
                     f"/api/v1/reports/{report_id}/export.html?precision=bf16"):
            assert client.get(link).status_code == 200

        # Signing out drops the cookie; a bearer header serves scripts as well.
        client.get("/logout")
        client.cookies.clear()
        assert client.get(page).status_code == 303
        assert client.get(f"/api/v1/reports/{report_id}/export.html").status_code == 401
        assert client.get(page, headers=auth("read")).status_code == 200


def test_revoked_token_loses_the_dashboard(
    engine: Any, settings_env: Callable[..., None], session: Any,
    token_for: Callable[[str], str],
) -> None:
    from app.repository import tokens

    with _gated_client(settings_env) as client:
        token = token_for("read")
        client.cookies.set(COOKIE, token)
        assert client.get("/").status_code == 200
        tokens.revoke_token(session, tokens.find_active(session, token).name)  # type: ignore[union-attr]
        session.commit()
        assert client.get("/").status_code == 303


def test_login_only_redirects_within_the_site(
    engine: Any, settings_env: Callable[..., None], token_for: Callable[[str], str],
) -> None:
    with _gated_client(settings_env) as client:
        for target in ("https://evil.example/", "//evil.example/x", "javascript:alert(1)"):
            response = client.post("/login", data={"token": token_for("read"), "next": target})
            assert response.headers["location"] == "/"


def test_login_page_escapes_next() -> None:
    page = login_page('/x"><script>alert(1)</script>')
    assert "<script>alert" not in page
    assert "&quot;&gt;&lt;script&gt;" in page


def test_gate_is_off_by_default(client: TestClient) -> None:
    assert client.get("/").status_code == 200
    assert json.loads(client.get("/healthz").text) == {"status": "ok"}


def test_sign_in_works_with_the_gate_off(
    client: TestClient, token_for: Callable[[str], str]
) -> None:
    """Reads are open, yet an admin signs in to get the history page's marks controls."""
    form = client.get("/login?next=/history")
    assert form.status_code == 200 and "Sign in with an admin token" in form.text
    signed = client.post("/login", data={"token": token_for("admin"), "next": "/history"},
                         follow_redirects=False)
    assert signed.status_code == 303 and signed.headers["location"] == "/history"
    assert signed.headers["set-cookie"].startswith(f"{COOKIE}=msc_")
