"""``moescope regressions REPORT`` from the database: the service the endpoint calls, and
the endpoint's document."""

from __future__ import annotations

import argparse

from app.api.history_schemas import report_regressions_out
from app.core.db import session_scope
from app.core.errors import NotFound
from app.services.explain import explain
from app.services.history import report_regressions
from cli.database import migrated_database_url
from cli.errors import CommandError
from cli.regressions import report, settings


def run(args: argparse.Namespace) -> int:
    chosen = settings(args)
    with session_scope(migrated_database_url(args)) as session:
        try:
            result = report_regressions(session, args.report_id, chosen)
            explanation = explain(session, result)
        except NotFound as exc:
            raise CommandError(str(exc.detail), 2) from exc
    return report(report_regressions_out(result, explanation).model_dump(mode="json"), chosen,
                  args)
