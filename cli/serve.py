"""``moescope serve``: migrate the database, optionally load the demo report, serve."""

from __future__ import annotations

import argparse
import os
import sys

import uvicorn

from app.core.config import get_settings
from app.core.db import session_scope, transaction
from app.services import reports as report_service
from app.services.report_list import report_count
from cli.database import database_url
from db.migrate import upgrade
from ingest.reference import reference_report_text
from ingest.validate import parse_json


def run(args: argparse.Namespace) -> int:
    url = database_url(args)
    upgrade(url)
    if args.demo:
        load_demo(url)
    # The app reads its database from the settings, not from these arguments: without
    # this, --database-url migrated one database while the server read another. Through
    # the environment, so that every --workers process (a fresh interpreter) sees it too.
    os.environ["MOESCOPE_DATABASE_URL"] = url
    get_settings.cache_clear()
    uvicorn.run(
        "app.main:create_app", factory=True, host=args.host, port=args.port,
        workers=args.workers, log_level=args.log_level, proxy_headers=True,
    )
    return 0


def load_demo(url: str) -> None:
    with session_scope(url) as session, transaction(session):
        if report_count(session):
            print("demo: database already holds reports; nothing loaded", file=sys.stderr)
            return
        result = report_service.ingest(session, parse_json(reference_report_text()))
        print(f"demo: loaded the reference report as id {result.id} "
              f"({result.case_count} cases)", file=sys.stderr)
