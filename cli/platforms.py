"""``moescope platforms [1 9] [--baseline 9] [--format markdown|csv]`` from the database:
the service GET /api/v1/platforms calls, printed as Markdown or CSV."""

from __future__ import annotations

import argparse
import sys

from app.core.db import session_scope
from app.core.errors import NotFound
from app.services.platforms import platforms_page
from app.services.platforms_text import platforms_csv, platforms_markdown
from cli.database import migrated_database_url
from cli.errors import CommandError


def run(args: argparse.Namespace) -> int:
    ids: list[int] = list(args.report_ids)
    if len(set(ids)) != len(ids):
        raise CommandError("report ids: give each report once", 2)
    if args.baseline is not None and ids and args.baseline not in ids:
        raise CommandError(f"--baseline: {args.baseline} is not one of the reports", 2)
    with session_scope(migrated_database_url(args)) as session:
        try:
            page = platforms_page(session, ids or None, args.baseline)
        except NotFound as exc:
            raise CommandError(str(exc.detail), 2) from exc
        except ValueError as exc:
            raise CommandError(f"--baseline: {args.baseline} is not one of the newest "
                               "report of each GPU", 2) from exc
    sys.stdout.write(platforms_csv(page) if args.format == "csv" else platforms_markdown(page))
    return 0
