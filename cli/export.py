"""``moescope export``: which view to export (checked here for both sources), the file
written whole, and ``--url``: the export fetched from a server, which needs httpx only.
From the database: cli/export_database.py."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.case_fields import FILTERABLE, CaseFilter
from app.matrix_metrics import DEFAULT_METRIC
from cli.errors import CommandError

if TYPE_CHECKING:
    # httpx: imported where the server is asked, not by an export from the database,
    # which reuses ``target`` and ``write``.
    from cli.service_client import ServiceClient


@dataclass(frozen=True)
class Target:
    """What to export: one report (``report_id``, None for the newest) under ``filters``, or
    the comparison ``compare`` = (base, head)."""

    report_id: int | None
    filters: CaseFilter
    compare: tuple[int, int] | None
    matrix_metric: str = DEFAULT_METRIC


def target(args: argparse.Namespace) -> Target:
    """The view the arguments name; a CommandError (exit 2) for a wrong combination."""
    if (args.report is None) == (args.compare is None):
        raise CommandError("give a report id (or 'latest'), or --compare BASE HEAD", 2)
    filters = CaseFilter(**{f.wire: getattr(args, f.wire) for f in FILTERABLE})
    if args.compare:
        if filters.active() or args.matrix_metric:
            raise CommandError("the case filters and --matrix-metric apply to one report's "
                               "export, not to --compare", 2)
        return Target(None, filters, (args.compare[0], args.compare[1]))
    metric = args.matrix_metric or DEFAULT_METRIC
    if args.report == "latest":
        return Target(None, filters, None, metric)
    try:
        return Target(int(args.report), filters, None, metric)
    except ValueError:
        raise CommandError(f"REPORT: {args.report!r} is neither a report id nor 'latest'",
                           2) from None


def run(args: argparse.Namespace) -> int:
    from cli.service_client import ServiceClient

    chosen = target(args)
    with ServiceClient(args.url, args.token) as server:
        filename, html = fetch(server, chosen)
    return write(args.output or Path(filename), html)


def fetch(server: ServiceClient, chosen: Target) -> tuple[str, bytes]:
    """The export's file name (as the server's Content-Disposition gives it) and bytes."""
    if chosen.compare:
        base, head = chosen.compare
        response = server.get("/api/v1/compare/export.html",
                              [("base", str(base)), ("head", str(head))])
    else:
        report_id = chosen.report_id if chosen.report_id is not None else _latest(server)
        params = [(f.wire, str(value)) for f, values in chosen.filters.active()
                  for value in values] + [("matrixMetric", chosen.matrix_metric)]
        response = server.get(f"/api/v1/reports/{report_id}/export.html", params)
    disposition = response.headers.get("content-disposition", "")
    filename = disposition.partition('filename="')[2].rstrip('"') or "moescope-export.html"
    return Path(filename).name, response.content


def _latest(server: ServiceClient) -> int:
    items = server.get("/api/v1/reports", [("limit", "1")]).json()["items"]
    if not items:
        raise CommandError(f"the server at {server.url} holds no report")
    return int(items[0]["id"])


def write(path: Path, content: bytes) -> int:
    """The file appears complete or not at all: written beside it, then renamed."""
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(content)
    partial.replace(path)
    print(f"wrote {path} ({len(content):,} bytes)", file=sys.stderr)
    return 0
