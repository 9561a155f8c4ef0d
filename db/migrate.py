"""Alembic, driven from code: ``moescope db upgrade``, ``serve`` and the tests use this.

The check that a database is migrated (``unmigrated``) imports no alembic: every command
that reads a database makes it, and importing alembic was a third of ``moescope export``'s
start-up. It reads the revision table with SQLAlchemy and the head from the version files."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# How a version file names itself and the revision it follows (alembic's template).
_REVISION = re.compile(r"^revision\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)
_DOWN_REVISION = re.compile(r"^down_revision\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]",
                            re.MULTILINE)


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # Passed as an attribute, not an ini option: a URL's '%' would trip interpolation.
    config.attributes["database_url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    from alembic import command

    command.downgrade(alembic_config(url), revision)


@lru_cache
def head_revision() -> str | None:
    """The revision that no other follows. Where the files do not name exactly one (a
    merge, a file written another way), alembic decides, or says what is wrong."""
    revisions: set[str] = set()
    followed: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        source = path.read_text(encoding="utf-8")
        revision, down = _REVISION.search(source), _DOWN_REVISION.search(source)
        if revision:
            revisions.add(revision.group(1))
        if down:
            followed.add(down.group(1))
    heads = revisions - followed
    if len(heads) == 1:
        return heads.pop()
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        version = connection.execute(text("SELECT version_num FROM alembic_version"))
        return version.scalar_one_or_none()


def unmigrated(engine: Engine) -> str | None:
    """Why the database cannot be used as it is (None when it is at the head revision): the
    one check behind /readyz and the commands that use a database. Raises SQLAlchemy's
    error when the database cannot be reached."""
    current, head = current_revision(engine), head_revision()
    if current == head:
        return None
    return (f"the database is at revision {current or 'none (empty)'}, not the head {head}: "
            "run `moescope db upgrade` first")
