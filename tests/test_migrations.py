"""Migrations match the models and go up, down and up again, on both databases."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from conftest import fresh_postgres_database
from sqlalchemy import create_engine, inspect, pool, text
from sqlalchemy.orm import Session

from app.models import Base
from app.repository.reports import count_reports
from app.services.report_json import report_json_bytes
from app.services.reports import append, ingest
from db.migrate import downgrade, head_revision, upgrade
from ingest.provenance import provenance_key
from ingest.series import series_context

TABLES = {"reports", "cases", "caveats", "api_tokens", "report_marks", "alerts", "alert_cases",
          "alert_events", "webhook_deliveries"}


@pytest.fixture(params=["sqlite", "postgres"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'migrations.db'}"
    else:
        with fresh_postgres_database() as url:
            yield url


def _tables(url: str) -> set[str]:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def _differences(url: str) -> list[object]:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def _revision(url: str) -> str | None:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def test_upgrade_matches_models_and_downgrade_round_trips(empty_database: str) -> None:
    upgrade(empty_database)
    assert _revision(empty_database) == head_revision()
    assert _tables(empty_database) == TABLES
    assert _differences(empty_database) == []

    downgrade(empty_database, "base")
    assert _revision(empty_database) is None
    assert _tables(empty_database) == set()

    upgrade(empty_database)
    assert _tables(empty_database) == TABLES
    assert _differences(empty_database) == []


def test_upgrade_gives_existing_reports_their_series(empty_database: str) -> None:
    upgrade(empty_database, "0001")
    engine = create_engine(empty_database, poolclass=pool.NullPool)
    meta = {"gpu": "NVIDIA H200", "shape": {"T": 64, "D": 7168, "E": 256, "K": 8}}
    try:
        with engine.begin() as connection:
            connection.execute(text(
                "INSERT INTO reports (content_sha256, date, gpu, meta, extra, case_count, "
                "created_at, updated_at) VALUES ('x', '2026-01-01', 'NVIDIA H200', :meta, "
                "'{}', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"), {"meta": json.dumps(meta)})
        upgrade(empty_database)
        with engine.connect() as connection:
            stored = connection.execute(text("SELECT series FROM reports")).scalar_one()
    finally:
        engine.dispose()
    # What ingest computes for the same meta today.
    assert stored == series_context(meta)


def test_0004_converts_stored_reports_both_ways(empty_database: str, reference: Any) -> None:
    """A report stored at head, taken down to 0002 (one JSON payload per case, the array
    columns) and up again: report.json keeps its exact bytes, and 0002's rows hold each case
    as posted."""
    upgrade(empty_database)
    body = copy.deepcopy(reference)
    body["meta"]["host"] = {"driver": "580.95", "torch": "2.11"}
    body["cases"][0]["phaseMS"] = {"dispatch": 0.25, "experts": 0.5, "combine": 0.125}
    engine = create_engine(empty_database, poolclass=pool.NullPool)
    try:
        with Session(engine) as session:
            report_id = ingest(session, body).id
            session.commit()
            posted = report_json_bytes(session, report_id)
        # What the service served before 0004 for this body, worked out here.
        document = {"meta": body["meta"], "cases": body["cases"]}
        assert posted == json.dumps(document, ensure_ascii=False).encode("utf-8")

        downgrade(empty_database, "0002")
        with engine.connect() as connection:
            rows = connection.execute(text(
                "SELECT case_id, payload, windows, receive_rows FROM cases "
                "ORDER BY position")).all()
        decoded = [(c, *(json.loads(v) if isinstance(v, str) else v for v in rest))
                   for c, *rest in rows]
        assert [r[0] for r in decoded] == [c["id"] for c in body["cases"]]
        assert [r[1] for r in decoded] == body["cases"]
        assert [r[2] for r in decoded] == [c["windows"] for c in body["cases"]]
        assert [r[3] for r in decoded] == [c.get("receiveRows", []) for c in body["cases"]]

        upgrade(empty_database)
        with Session(engine) as session:
            assert report_json_bytes(session, report_id) == posted
            row = session.execute(text(
                "SELECT window_min_ms, window_max_ms FROM cases ORDER BY position")).first()
            assert row is not None
            combined = body["cases"][0]["windows"]["combined"]
            assert tuple(row) == (min(combined), max(combined))
            phases = session.execute(text(
                "SELECT phase_dispatch_ms, phase_experts_ms, phase_combine_ms FROM cases "
                "ORDER BY position")).all()
            assert [tuple(p) for p in phases[:2]] == [(0.25, 0.5, 0.125), (None, None, None)]
            stored = session.execute(text("SELECT provenance FROM reports")).scalar_one()
            assert stored == provenance_key(body["meta"])
    finally:
        engine.dispose()


def _sha256_of_canonical(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_0010_hashes_stored_reports_current_content(empty_database: str, reference: Any) -> None:
    """A report posted with 60 cases and grown by 3 appends, taken down to 0008 and up
    again: 0010 hashes the body as it stands (the 63 cases), so the whole file posted
    afterwards is that report, while the first post's hash stays the dedup key."""
    upgrade(empty_database)
    first = {**reference, "cases": reference["cases"][:60]}
    engine = create_engine(empty_database, poolclass=pool.NullPool)
    try:
        with Session(engine) as session:
            report_id = ingest(session, first).id
            append(session, report_id, {"cases": reference["cases"][60:]})
            session.commit()

        downgrade(empty_database, "0008")
        with engine.connect() as connection:
            columns = {c["name"] for c in inspect(connection).get_columns("reports")}
        assert "current_sha256" not in columns

        upgrade(empty_database)
        with engine.connect() as connection:
            stored = connection.execute(text(
                "SELECT content_sha256, current_sha256 FROM reports")).one()
        assert tuple(stored) == (_sha256_of_canonical(first), _sha256_of_canonical(reference))
        with Session(engine) as session:
            again = ingest(session, reference)
            session.commit()
            assert (again.id, again.created) == (report_id, False)
            assert count_reports(session) == 1
    finally:
        engine.dispose()
