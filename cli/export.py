"""``moescope export``: write an export from the database, or fetch it from a server."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

# app.case_fields needs nothing but the standard library: `export --url` also runs on a
# GPU node's base install.
from app.case_fields import FILTERABLE, CaseFilter


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("report", nargs="?", metavar="REPORT_ID|latest",
                        help="the report to export (not with --compare)")
    parser.add_argument("--compare", nargs=2, type=int, metavar=("BASE", "HEAD"),
                        help="export the comparison of two reports instead")
    for field in FILTERABLE:
        parser.add_argument(f"--{field.wire}", type=field.kind, action="append", default=[],
                            choices=field.choices or None,
                            help="case filter, as the API's (repeat to match any)")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="where to write (default: the export's own name, here)")
    parser.add_argument("--url", help="fetch the export from this moescope server")
    parser.add_argument("--token", help="read token for --url (or MOESCOPE_TOKEN)")
    parser.add_argument("--database-url", help="overrides MOESCOPE_DATABASE_URL")


def run(args: argparse.Namespace) -> int:
    if (args.report is None) == (args.compare is None):
        print("error: give a report id (or 'latest'), or --compare BASE HEAD", file=sys.stderr)
        return 2
    if args.compare and any(getattr(args, f.wire) for f in FILTERABLE):
        print("error: the case filters apply to one report's export, not to --compare",
              file=sys.stderr)
        return 2
    report_id: int | None = None
    if args.report is not None and args.report != "latest":
        try:
            report_id = int(args.report)
        except ValueError:
            print(f"error: REPORT: {args.report!r} is neither a report id nor 'latest'",
                  file=sys.stderr)
            return 2
    try:
        filename, html = (_fetch(args, report_id) if args.url else _build(args, report_id))
    except ExportFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out: Path = args.output or Path(filename)
    _write_whole(out, html)
    print(f"wrote {out} ({len(html):,} bytes)", file=sys.stderr)
    return 0


class ExportFailed(Exception):
    pass


def _filter_params(args: argparse.Namespace) -> list[tuple[str, str]]:
    return [(f.wire, str(value)) for f in FILTERABLE for value in getattr(args, f.wire)]


def _build(args: argparse.Namespace, report_id: int | None) -> tuple[str, bytes]:
    from app.core.db import session_scope
    from app.core.errors import NotFound
    from app.export import service
    from app.repository import reports as reports_repo
    from cli.main import _database_url, _unmigrated

    url = _database_url(args)
    problem = _unmigrated(url)
    if problem:
        raise ExportFailed(problem)
    with session_scope(url) as session:
        try:
            if args.compare:
                export = service.export_compare(session, *args.compare)
            else:
                rid = (report_id if report_id is not None
                       else reports_repo.latest_report_id(session))
                filters = CaseFilter(**{f.wire: getattr(args, f.wire) for f in FILTERABLE})
                export = service.export_report(session, rid, filters)
        except NotFound as exc:
            raise ExportFailed(exc.detail) from exc
    return export.filename, export.html.encode("utf-8")


def _fetch(args: argparse.Namespace, report_id: int | None) -> tuple[str, bytes]:
    import httpx

    from runner.http import resolve_token

    base = args.url.rstrip("/")
    token = resolve_token(args.token)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=base, headers=headers, timeout=300) as client:
        if args.compare:
            path, params = "/api/v1/compare/export.html", [
                ("base", str(args.compare[0])), ("head", str(args.compare[1]))]
        else:
            rid = report_id if report_id is not None else _latest(client)
            path, params = f"/api/v1/reports/{rid}/export.html", _filter_params(args)
        response = _get(client, path, params)
    disposition = response.headers.get("content-disposition", "")
    filename = disposition.partition('filename="')[2].rstrip('"') or "moescope-export.html"
    return Path(filename).name, response.content


def _latest(client: Any) -> int:
    items = _get(client, "/api/v1/reports", [("limit", "1")]).json()["items"]
    if not items:
        raise ExportFailed(f"the server at {client.base_url} holds no report")
    return int(items[0]["id"])


def _get(client: Any, path: str, params: list[tuple[str, str]]) -> Any:
    import httpx

    from runner.http import answer_detail

    try:
        response = client.get(path, params=params)
    except httpx.HTTPError as exc:
        raise ExportFailed(f"cannot reach {client.base_url}: {exc}") from exc
    if response.status_code != 200:
        raise ExportFailed(f"{path}: HTTP {response.status_code}: {answer_detail(response)}")
    return response


def _write_whole(path: Path, content: bytes) -> None:
    """The file appears complete or not at all: written beside it, then renamed."""
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(content)
    partial.replace(path)
