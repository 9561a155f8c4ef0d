"""Domain errors and the handlers that give every error one JSON shape:
``{"error": <code>, "detail": <message or list of problems>}``."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.core.config import get_settings
from ingest.validate import InvalidPayload, format_path

log = logging.getLogger("moescope")


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


def _moescope_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MoescopeError)
    return JSONResponse(error_body(exc.code, exc.detail), exc.status_code, headers=exc.headers)


def _invalid_payload(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, InvalidPayload)
    status = 400 if exc.malformed else 422
    code = "malformed_json" if exc.malformed else "validation_error"
    return JSONResponse(error_body(code, [p.as_dict() for p in exc.problems]), status)


def _request_validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    detail = [
        {
            "loc": list(err["loc"]),
            "path": format_path(tuple(err["loc"][1:])),
            "msg": err["msg"],
            "type": err["type"],
        }
        for err in exc.errors()
    ]
    return JSONResponse(error_body("validation_error", detail), 422)


def _not_modified(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, NotModified)
    return Response(status_code=304, headers=exc.headers)


_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route takes at this path. Starlette's 405 names only the first
    route's (GET and POST of one path are two routes), so each method is routed here as
    the router would; HEAD goes with GET (``HeadAsGet``), OPTIONS is answered anywhere."""
    methods = {"OPTIONS"}
    for method in _METHODS:
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] is Match.FULL for route in request.app.router.routes):
            methods.add(method)
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(allowed_methods(request))
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=headers)
        detail = f"{request.method} is not allowed here; allowed: {headers['Allow']}"
        return JSONResponse(error_body("method_not_allowed", detail), 405, headers=headers)
    code = {404: "not_found"}.get(exc.status_code, "http_error")
    return JSONResponse(error_body(code, exc.detail), exc.status_code, headers=headers or None)


def _database_error(_: Request, exc: Exception) -> JSONResponse:
    log.warning("database unavailable: %s", exc.__class__.__name__, exc_info=exc)
    retry_after = get_settings().retry_after_s
    return JSONResponse(
        error_body("database_unavailable", "the database is unreachable; retry later"),
        503,
        headers={"Retry-After": str(retry_after)},
    )


def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return JSONResponse(error_body("internal_error", "internal server error"), 500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(MoescopeError, _moescope_error)
    app.add_exception_handler(NotModified, _not_modified)
    app.add_exception_handler(InvalidPayload, _invalid_payload)
    app.add_exception_handler(RequestValidationError, _request_validation)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    # Connection-level failures: the database is down or restarting, not a bug.
    app.add_exception_handler(sa_exc.OperationalError, _database_error)
    app.add_exception_handler(sa_exc.InterfaceError, _database_error)
    app.add_exception_handler(sa_exc.TimeoutError, _database_error)
    app.add_exception_handler(Exception, _unexpected)
