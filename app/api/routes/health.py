"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.api.responses import errors
from app.api.schemas import Health, Readiness
from app.core.config import get_settings
from app.core.db import get_engine
from app.core.errors import error_body
from db.migrate import head_revision, unmigrated

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> Health:
    """The process is up."""
    return Health(status="ok")


@router.get("/readyz", response_model=Readiness, responses=errors(503))
def readyz() -> JSONResponse | Readiness:
    """The database is reachable and migrated to the head revision."""
    try:
        problem = unmigrated(get_engine())
    except Exception as exc:  # any failure to reach the database means not ready
        return JSONResponse(
            error_body("database_unavailable", f"database unreachable: {type(exc).__name__}"),
            503, headers={"Retry-After": str(get_settings().retry_after_s)},
        )
    if problem:
        return JSONResponse(error_body("database_not_migrated", problem), 503)
    return Readiness(status="ready", revision=head_revision())
