"""The database a command uses (``--database-url``, else MOESCOPE_DATABASE_URL), and the
one check that it is migrated before a command reads or writes it. Server extra."""

from __future__ import annotations

import argparse

from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from app.core.config import get_settings
from app.core.db import engine_for
from cli.errors import CommandError
from db.migrate import unmigrated


def database_url(args: argparse.Namespace) -> str:
    return str(getattr(args, "database_url", None) or get_settings().database_url)


def migrated_database_url(args: argparse.Namespace) -> str:
    """The database URL; a CommandError (exit 2) saying what to do when the database cannot
    be reached or is not at the head revision."""
    url = database_url(args)
    try:
        problem = unmigrated(engine_for(url))
    except DBAPIError as exc:
        problem = f"cannot reach the database: {exc.__class__.__name__}: {exc.orig}"
    except SQLAlchemyError as exc:
        problem = f"cannot reach the database: {exc}"
    if problem:
        raise CommandError(problem, 2)
    return url
