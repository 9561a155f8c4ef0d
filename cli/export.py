"""``moescope export --url``: the export fetched from a server, which needs httpx only.
The view and the file: cli/export_target.py; from the database: cli/export_database.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.errors import CommandError
from cli.export_target import Target, target, write
from cli.service_client import ServiceClient


def run(args: argparse.Namespace) -> int:
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
