"""With MOESCOPE_REQUIRE_READ_TOKEN=1 the dashboard is closed like the API's reads.

The API's routes check their tokens in their dependencies; this gate covers the dashboard
with the same check (services/auth). A browser cannot send a bearer header, so ``/login``
takes a read token once and keeps it in an HttpOnly cookie; a bearer header works as well
(scripts). ``/login`` and ``/logout`` are served with the gate off too: there the cookie
only says who is signed in, so an admin's token lets the history page mark reports.
"""

from __future__ import annotations

import html
import json
from urllib.parse import parse_qs, quote

from anyio import to_thread
from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.config import get_settings
from app.core.db import session_scope
from app.core.errors import Forbidden, Unauthorized, error_body
from app.services.auth import COOKIE, authorise, presented_token

# Paths that carry no report data, or guard themselves.
_OPEN_PREFIXES = (
    "/api/", "/docs", "/redoc", "/openapi.json", "/healthz", "/readyz", "/login", "/logout",
    "/assets/", "/_dash-component-suites/", "/_favicon.ico",
)
_MAX_FORM_BYTES = 4096


def token_may_read(token: str | None) -> bool:
    with session_scope() as session:
        try:
            authorise(session, token, "read")
        except (Unauthorized, Forbidden):
            return False
    return True


async def _may_read(token: str | None) -> bool:
    if not token:
        return False
    return await to_thread.run_sync(token_may_read, token)


def _token_from(scope: Scope) -> str | None:
    request = HTTPConnection(scope)
    return presented_token(request.headers.get("authorization"), request.cookies.get(COOKIE))


def _safe_next(target: str) -> str:
    # Only a path on this site: never an absolute or protocol-relative URL.
    return target if target.startswith("/") and not target.startswith("//") else "/"


def login_page(next_path: str, error: str | None = None, required: bool = True) -> str:
    message = f'<p class="error">{html.escape(error)}</p>' if error else ""
    why = ("This server requires a token with read scope (<code>moescope token create NAME\n"
           "--scope read</code>)." if required else
           "Reading needs no token here. Sign in with an admin token (<code>moescope token "
           "create NAME --scope admin</code>) to mark reports as steps or outliers on the "
           "history page.")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>moescope: sign in</title>
<style>body{{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;color:#1d2330}}
input{{width:100%;padding:.5rem;margin:.5rem 0;box-sizing:border-box}}
.error{{color:#b42318}}</style>
</head><body><h1>moescope</h1>
<p>{why}</p>{message}
<form method="post" action="/login">
<input type="hidden" name="next" value="{html.escape(next_path, quote=True)}">
<label>Token <input type="password" name="token" autocomplete="off" required></label>
<button type="submit">Sign in</button></form></body></html>"""


class ReadGate:
    def __init__(self, app: ASGIApp, *, enabled: bool) -> None:
        self.app = app
        self.enabled = enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Sign-in works with the gate off too: an admin signs in to mark reports.
        path: str = scope["path"]
        if path == "/login":
            await self._login(scope, receive, send)
            return
        if path == "/logout":
            await self._respond(send, 303, b"", location="/login",
                                cookie=f"{COOKIE}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict")
            return
        if not self.enabled or path.startswith(_OPEN_PREFIXES):
            await self.app(scope, receive, send)
            return
        try:
            allowed = await _may_read(_token_from(scope))
        except (OperationalError, InterfaceError):
            body = json.dumps(error_body("database_unavailable",
                                         "the database is unreachable; retry later"))
            await self._respond(send, 503, body.encode(), content_type="application/json",
                                retry_after=get_settings().retry_after_s)
            return
        if allowed:
            await self.app(scope, receive, send)
            return
        if path.startswith("/_dash"):
            body = json.dumps(error_body("unauthorized", "a valid read token is required"))
            await self._respond(send, 401, body.encode(), content_type="application/json")
        else:
            query = scope.get("query_string", b"").decode("latin-1")
            next_path = path + (f"?{query}" if query else "")
            await self._respond(send, 303, b"", location=f"/login?next={quote(next_path)}")

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if scope["method"] != "POST":
            page = login_page(_safe_next(query.get("next", ["/"])[0]), required=self.enabled)
            await self._respond(send, 200, page.encode(), content_type="text/html; charset=utf-8")
            return
        form = parse_qs((await _read_body(receive, _MAX_FORM_BYTES)).decode("utf-8", "replace"))
        next_path = _safe_next(form.get("next", ["/"])[0])
        token = form.get("token", [""])[0].strip()
        if not await _may_read(token):
            page = login_page(next_path, "That token is unknown, revoked or lacks read scope.",
                              required=self.enabled)
            await self._respond(send, 401, page.encode(), content_type="text/html; charset=utf-8")
            return
        cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
        if scope.get("scheme") == "https":
            cookie += "; Secure"
        await self._respond(send, 303, b"", location=next_path, cookie=cookie)

    @staticmethod
    async def _respond(
        send: Send, status: int, body: bytes, *, content_type: str = "text/plain",
        location: str | None = None, cookie: str | None = None, retry_after: int | None = None,
    ) -> None:
        headers = [(b"content-type", content_type.encode()),
                   (b"content-length", str(len(body)).encode()),
                   (b"cache-control", b"no-store")]
        if location:
            headers.append((b"location", location.encode("latin-1")))
        if cookie:
            headers.append((b"set-cookie", cookie.encode("latin-1")))
        if retry_after is not None:
            headers.append((b"retry-after", str(retry_after).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive, limit: int) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += bytes(message.get("body", b""))
        if len(body) > limit or not message.get("more_body"):
            return body[:limit]
