"""``moescope ingest FILE...`` into a database: each file lands whole or not at all; a bad
file is reported with the same per-field problems as the API gives, and the rest still
load. The loop and ``--url`` live in cli/ingest.py, which needs no server."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from app.core.db import session_scope, transaction
from app.core.errors import MoescopeError
from app.services import reports as report_service
from cli.database import migrated_database_url
from cli.ingest import load_files, print_problems, print_result
from ingest.validate import InvalidPayload, parse_json


def run(args: argparse.Namespace) -> int:
    return store_files(args.files, migrated_database_url(args))


def store_files(files: list[Path], database_url: str) -> int:
    """Returns the exit status: 0 when every file loaded, 1 otherwise."""
    return load_files(files, partial(_store, database_url=database_url))


def _store(path: Path, body: bytes, *, database_url: str) -> bool:
    try:
        # What POST /reports does, through the same service and the same commit.
        with session_scope(database_url) as session, transaction(session):
            result = report_service.ingest(session, parse_json(body))
    except InvalidPayload as exc:
        print_problems(path, [str(p) for p in exc.problems])
        return False
    except MoescopeError as exc:
        print(f"{path}: {exc.detail}", file=sys.stderr)
        return False
    print_result(path, result.id, result.case_count, result.created)
    return True
