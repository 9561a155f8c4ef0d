"""Error answers in OpenAPI: one ``Error`` component, ``{"error", "detail"}``, declared on
each route for the statuses it can return (``core/errors`` builds every such answer)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Problem(BaseModel):
    """One problem of a 422 (or a 400): where (``loc``; ``path`` as in the report's JSON)
    and what."""

    model_config = ConfigDict(extra="forbid")
    loc: list[str | int]
    path: str
    msg: str
    type: str


class Error(BaseModel):
    model_config = ConfigDict(extra="forbid")
    error: str
    detail: str | list[Problem]


_WHY = {
    400: "Malformed JSON (detail: where it breaks)",
    401: "Missing, unknown or revoked token (WWW-Authenticate: Bearer)",
    403: "The token lacks the scope",
    404: "No such report, case or series",
    409: "A case id is stored with other content",
    413: "Body over MOESCOPE_MAX_BODY_MB",
    415: "Body not declared application/json",
    422: "Invalid parameters or body: every problem with its path",
    503: "Database unavailable or not migrated (Retry-After)",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses, each with the Error body."""
    return {status: {"model": Error, "description": _WHY[status]} for status in statuses}


NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not modified: the If-None-Match ETag is the report's version"}}
# Every read of the database; 401 only where MOESCOPE_REQUIRE_READ_TOKEN (openapi.py).
READ = errors(401, 422, 503)
WRITE = errors(400, 401, 403, 413, 415, 422, 503)
