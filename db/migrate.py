"""Alembic, driven from code: ``moescope db upgrade``, ``serve`` and the tests use this."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # Passed as an attribute, not an ini option: a URL's '%' would trip interpolation.
    config.attributes["database_url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


@lru_cache
def head_revision() -> str | None:
    return ScriptDirectory(str(MIGRATIONS)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def unmigrated(engine: Engine) -> str | None:
    """Why the database cannot be used as it is (None when it is at the head revision): the
    one check behind /readyz and the commands that use a database. Raises SQLAlchemy's
    error when the database cannot be reached."""
    current, head = current_revision(engine), head_revision()
    if current == head:
        return None
    return (f"the database is at revision {current or 'none (empty)'}, not the head {head}: "
            "run `moescope db upgrade` first")
