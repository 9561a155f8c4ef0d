"""One commit, at the boundary: ``POST /reports`` and ``moescope ingest`` store a report
through the same service inside ``app.core.db.transaction``, so a failure anywhere in its
writing leaves nothing behind, and a commit that fails is never answered as a success."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from api_helpers import REPORTS, error_detail, row_counts
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from app.main import create_app
from app.repository import reports as reports_repo
from cli.main import main

Body = dict[str, Any]


def _fail_after_the_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    # The summary is written after every case row and caveat: failing there leaves a
    # report whose rows only a rollback can take back.
    def fail(session: Session, report_id: int) -> int:
        raise RuntimeError("injected: the summary could not be written")

    monkeypatch.setattr(reports_repo, "refresh_summary", fail)


def test_a_post_failing_midway_stores_nothing(
    engine: Engine, settings_env: Any, auth: Any, reference: Body, session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    headers = auth("ingest")
    _fail_after_the_cases(monkeypatch)
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        response = client.post(REPORTS, json=reference, headers=headers)
    error_detail(response, 500, "internal_error")
    assert row_counts(session) == (0, 0, 0)


def test_moescope_ingest_failing_midway_stores_nothing(
    engine: Engine, database_url: str, tmp_path: Path, reference: Body, session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(reference))
    _fail_after_the_cases(monkeypatch)
    with pytest.raises(RuntimeError, match="injected"):
        main(["ingest", str(path), "--database-url", database_url])
    assert row_counts(session) == (0, 0, 0)


def test_a_failed_commit_is_not_answered_as_created(
    engine: Engine, settings_env: Any, auth: Any, reference: Body, session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    headers = auth("ingest")

    def lost(self: Session) -> None:
        raise sa_exc.OperationalError("COMMIT", {}, Exception("connection lost"))

    monkeypatch.setattr(Session, "commit", lost)
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        response = client.post(REPORTS, json=reference, headers=headers)
    error_detail(response, 503, "database_unavailable")
    assert row_counts(session) == (0, 0, 0)
