"""Migrations match the models and go up, down and up again, on both databases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from conftest import fresh_postgres_database
from sqlalchemy import create_engine, inspect, pool

from app.models import Base
from db.migrate import downgrade, head_revision, upgrade

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
