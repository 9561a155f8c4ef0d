"""Domain errors and the handlers that give every error one JSON shape:
``{"error": <code>, "detail": <message or list of problems>}``."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

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


def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(error_body(code, exc.detail), exc.status_code, headers=exc.headers)


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
    app.add_exception_handler(InvalidPayload, _invalid_payload)
    app.add_exception_handler(RequestValidationError, _request_validation)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    # Connection-level failures: the database is down or restarting, not a bug.
    app.add_exception_handler(sa_exc.OperationalError, _database_error)
    app.add_exception_handler(sa_exc.InterfaceError, _database_error)
    app.add_exception_handler(sa_exc.TimeoutError, _database_error)
    app.add_exception_handler(Exception, _unexpected)
