"""Small helpers shared by the in-process API tests (no fixtures: those are in conftest)."""

from __future__ import annotations

import copy
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.models import CaseRow, CaveatRow, ReportRow

REPORTS = "/api/v1/reports"
PROBLEM_KEYS = {"loc", "path", "msg", "type"}


def small_report(reference: dict[str, Any], n: int = 2) -> dict[str, Any]:
    """The reference meta with its first ``n`` cases: cheap to post."""
    return {"meta": copy.deepcopy(reference["meta"]),
            "cases": copy.deepcopy(reference["cases"][:n])}


def error_detail(response: httpx.Response, status: int, code: str | None = None) -> Any:
    """Assert the status and the shared error shape; return ``detail``."""
    assert response.status_code == status, response.text
    # The body must be valid UTF-8 JSON whatever the input held (surrogates, NUL).
    body = response.content.decode("utf-8")
    assert response.headers["content-type"].startswith("application/json"), body
    data = response.json()
    assert set(data) == {"error", "detail"}, data
    assert isinstance(data["error"], str) and data["error"]
    if code is not None:
        assert data["error"] == code, data
    if isinstance(data["detail"], list):
        for problem in data["detail"]:
            assert set(problem) == PROBLEM_KEYS, problem
            assert problem["loc"][0] == "body" or problem["loc"][0] in ("query", "path")
    return data["detail"]


def problems(response: httpx.Response, status: int = 422) -> list[tuple[str, str]]:
    """(path, msg) of every problem of a validation error."""
    detail = error_detail(response, status)
    assert isinstance(detail, list) and detail, detail
    return [(p["path"], p["msg"]) for p in detail]


def row_counts(session: Session) -> tuple[int, int, int]:
    """(reports, cases, caveats) rows in the database, read fresh."""
    session.expire_all()
    counts = tuple(
        int(session.execute(select(func.count()).select_from(table)).scalar_one())
        for table in (ReportRow, CaseRow, CaveatRow)
    )
    session.rollback()
    return counts  # type: ignore[return-value]
