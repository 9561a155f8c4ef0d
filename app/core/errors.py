"""Domain errors and the one JSON shape of every error:
``{"error": <code>, "detail": <message or list of problems>}``. The handlers that answer
with it are ``app.core.error_handlers``: services raise these without importing FastAPI."""

from __future__ import annotations

from typing import Any


class MoescopeError(Exception):
    status_code = 500
    code = "internal_error"
    headers: dict[str, str] | None = None

    def __init__(self, detail: Any) -> None:
        super().__init__(str(detail))
        self.detail = detail


class NotFound(MoescopeError):
    status_code = 404
    code = "not_found"


class Conflict(MoescopeError):
    status_code = 409
    code = "conflict"


class Unauthorized(MoescopeError):
    status_code = 401
    code = "unauthorized"
    headers = {"WWW-Authenticate": "Bearer"}

    def __init__(self) -> None:
        # One body for missing, unknown and revoked tokens: nothing to probe.
        super().__init__("a valid bearer token is required")


class Forbidden(MoescopeError):
    status_code = 403
    code = "forbidden"


class BodyTooLarge(MoescopeError):
    status_code = 413
    code = "payload_too_large"
    # Without it the server answers early and then drains the rest of the body: a client
    # streaming gigabytes would send them all before it reads the 413.
    headers = {"Connection": "close"}


class UnsupportedMediaType(MoescopeError):
    status_code = 415
    code = "unsupported_media_type"


class NotModified(Exception):
    """The client holds the current version (If-None-Match): 304, no body."""

    def __init__(self, etag: str, cache_control: str) -> None:
        super().__init__(etag)
        self.headers = {"ETag": etag, "Cache-Control": cache_control}


def error_body(code: str, detail: Any) -> dict[str, Any]:
    return {"error": code, "detail": detail}
