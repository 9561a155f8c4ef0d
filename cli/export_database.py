"""``moescope export`` from the database: the same service the API's export routes call."""

from __future__ import annotations

import argparse
from pathlib import Path

from app.core.db import session_scope
from app.core.errors import NotFound
from app.export import service
from app.services.report_list import latest_report_id
from cli.database import migrated_database_url
from cli.errors import CommandError
from cli.export_target import target, write


def run(args: argparse.Namespace) -> int:
    chosen = target(args)
    with session_scope(migrated_database_url(args)) as session:
        try:
            if chosen.compare:
                export = service.export_compare(session, *chosen.compare)
            else:
                report_id = (chosen.report_id if chosen.report_id is not None
                             else latest_report_id(session))
                export = service.export_report(session, report_id, chosen.filters,
                                               matrix_metric=chosen.matrix_metric)
        except NotFound as exc:
            raise CommandError(str(exc.detail)) from exc
    return write(args.output or Path(export.filename), export.html.encode("utf-8"))
