"""The service: FastAPI app with the API under /api/v1 and the Dash dashboard at /."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.gzip import GZipMiddleware

from app.api.docs import mount_docs
from app.api.openapi import add_body_schemas, apply_settings, operation_id
from app.api.routes import alerts, export, health, history, marks, matrix, platforms, reports
from app.core.config import Settings, get_settings
from app.core.db import get_engine
from app.core.error_handlers import install_error_handlers
from app.core.errors import NotFound
from app.core.head import HeadAsGet
from app.core.limits import BodySizeLimit
from app.core.read_gate import ReadGate
from app.dashboard import mount_dashboard, set_up_dashboard
from app.services.report_view import ReportCache

log = logging.getLogger("moescope")


@asynccontextmanager
async def warm_up(_app: FastAPI) -> AsyncIterator[None]:
    """Before the first request: open the database pool (importing the driver), let Dash set
    itself up, and move the start-up's objects out of the garbage collector's sight (once,
    here, never on a request). Otherwise the first page after a start pays ~300 ms for
    them, and every full collection walks Dash and plotly."""
    try:
        with get_engine().connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:  # the requests will say so; serving need not wait
        log.warning("database not reachable at start-up: %s", exc)
    await set_up_dashboard(_app)
    gc.collect()
    gc.freeze()
    yield


def add_middleware(app: FastAPI, settings: Settings) -> None:
    """The middleware, outermost first (each ``add_middleware`` wraps the ones before it,
    so they are added innermost first):

    1. CORS (only with MOESCOPE_CORS_ORIGINS): answers preflights before anything else
       and marks every answer, errors and 304s included.
    2. HeadAsGet: HEAD runs as GET with the body dropped, after gzip has set its length.
    3. GZip: bodies over MOESCOPE_GZIP_MIN_BYTES, when the client accepts it.
    4. ReadGate: with MOESCOPE_REQUIRE_READ_TOKEN, the dashboard asks for a token.
    5. BodySizeLimit: a body over MOESCOPE_MAX_BODY_MB is a 413 while it streams in.
    Then Starlette's exception middleware, the error handlers of ``core/errors``, the
    routes."""
    app.add_middleware(BodySizeLimit, max_bytes=int(settings.max_body_mb * 2**20))
    app.add_middleware(ReadGate, enabled=settings.require_read_token)
    # Level 3: the reference's case list 107 KB -> 21 KB in 0.7 ms, where level 6 gives
    # 19 KB in 2.3 ms and 9 gives 18.7 KB in 3.1 ms (measured on this 2-core machine);
    # answers over 128 KiB are compressed off the event loop.
    app.add_middleware(GZipMiddleware, minimum_size=settings.gzip_min_bytes, compresslevel=3)
    app.add_middleware(HeadAsGet)
    origins = settings.cors_origin_list()
    if origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=origins,
            allow_methods=["GET", "HEAD", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "If-None-Match"],
            expose_headers=["ETag", "Location", "Retry-After", "Content-Disposition"],
        )


def create_app() -> FastAPI:
    settings = get_settings()
    app = FastAPI(
        title="moescope",
        summary="Results database for GPU MoE expert-parallel benchmarks",
        version="0.1.0",
        lifespan=warm_up,
        docs_url=None,  # mount_docs: served without a CDN
        redoc_url=None,
        generate_unique_id_function=operation_id,
        # One component per model for requests and answers (Report, Case, Meta).
        separate_input_output_schemas=False,
    )
    # The reports the pages and the exports read last, shared by this process's requests.
    app.state.report_cache = ReportCache()
    install_error_handlers(app)
    mount_docs(app, app.openapi_url or "/openapi.json")
    app.include_router(reports.router, prefix="/api/v1")
    app.include_router(matrix.router, prefix="/api/v1")
    app.include_router(platforms.router, prefix="/api/v1")
    app.include_router(history.router, prefix="/api/v1")
    app.include_router(marks.router, prefix="/api/v1")
    app.include_router(alerts.router, prefix="/api/v1")
    app.include_router(export.router, prefix="/api/v1")
    app.include_router(health.router)
    add_middleware(app, settings)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, summary=app.summary, routes=app.routes,
                separate_input_output_schemas=False,
            )
            app.openapi_schema = apply_settings(add_body_schemas(schema), settings)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/api/{path:path}", include_in_schema=False)
    def api_not_found(path: str) -> None:
        # Without this, Dash's catch-all page route would answer unknown API paths with HTML.
        raise NotFound(f"no API route /api/{path}")

    # Last: Dash adds a catch-all GET route for its pages at start-up, after the API's.
    mount_dashboard(app)
    return app
