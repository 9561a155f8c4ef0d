"""The handlers that answer every error in ``app.core.errors``' one JSON shape."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.core.config import get_settings
from app.core.errors import MoescopeError, NotModified, error_body
from ingest.validate import InvalidPayload, format_path

log = logging.getLogger("moescope")


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
