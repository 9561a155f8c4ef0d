"""``moescope alerts rebuild``: every alert recomputed from the stored series
(``app.services.alert_rebuild``), in one transaction; triaged alerts are kept."""

from __future__ import annotations

import argparse
import time

from app.core.db import session_scope, transaction
from app.services.alert_rebuild import rebuild
from cli.database import migrated_database_url


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    with session_scope(migrated_database_url(args)) as session, transaction(session):
        done = rebuild(session)
    print(f"{done.opened} alert(s) opened over {done.series} series, {done.kept} triaged "
          f"kept, in {time.perf_counter() - started:.1f} s")
    return 0
