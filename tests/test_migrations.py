"""Migrations match the models and go up, down and up again, on both databases."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from conftest import fresh_postgres_database
from sqlalchemy import create_engine, inspect, pool, text

from app.models import Base
from db.migrate import downgrade, head_revision, upgrade
from ingest.series import series_context

TABLES = {"reports", "cases", "caveats", "api_tokens"}


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
