"""``moescope db upgrade|downgrade|current``: the database's migrations."""

from __future__ import annotations

import argparse

from app.core.db import engine_for
from cli.database import database_url
from db import migrate


def run(args: argparse.Namespace) -> int:
    url = database_url(args)
    if args.db_command == "upgrade":
        migrate.upgrade(url, args.revision)
    elif args.db_command == "downgrade":
        migrate.downgrade(url, args.revision)
    print(f"database at revision {migrate.current_revision(engine_for(url))} "
          f"(head {migrate.head_revision()})")
    return 0
