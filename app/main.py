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

from app.api.openapi import add_body_schemas
from app.api.routes import export, health, history, marks, reports
from app.core.config import get_settings
from app.core.db import get_engine
from app.core.errors import NotFound, install_error_handlers
from app.core.limits import BodySizeLimit
from app.core.read_gate import ReadGate
from app.dashboard import mount_dashboard

log = logging.getLogger("moescope")


@asynccontextmanager
async def warm_up(_app: FastAPI) -> AsyncIterator[None]:
    """Before the first request: open the database pool (importing the driver) and move the
    start-up's objects out of the garbage collector's sight. Otherwise the first page
    after a start pays ~300 ms for both, and every full collection walks Dash and plotly."""
    try:
        with get_engine().connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:  # the requests will say so; serving need not wait
        log.warning("database not reachable at start-up: %s", exc)
    gc.collect()
    gc.freeze()
    yield


def create_app() -> FastAPI:
    settings = get_settings()
    app = FastAPI(
        title="moescope",
        summary="Results database for GPU MoE expert-parallel benchmarks",
        version="0.1.0",
        lifespan=warm_up,
    )
    install_error_handlers(app)
    app.include_router(reports.router, prefix="/api/v1")
    app.include_router(history.router, prefix="/api/v1")
    app.include_router(marks.router, prefix="/api/v1")
    app.include_router(export.router, prefix="/api/v1")
    app.include_router(health.router)
    app.add_middleware(BodySizeLimit, max_bytes=int(settings.max_body_mb * 2**20))
    app.add_middleware(ReadGate, enabled=settings.require_read_token)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, summary=app.summary, routes=app.routes
            )
            app.openapi_schema = add_body_schemas(schema)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/api/{path:path}", include_in_schema=False)
    def api_not_found(path: str) -> None:
        # Without this, Dash's catch-all page route would answer unknown API paths with HTML.
        raise NotFound(f"no API route /api/{path}")

    # Last: Dash adds a catch-all GET route for its pages at start-up, after the API's.
    mount_dashboard(app)
    return app
