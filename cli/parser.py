"""The command line's grammar: every command, its options and its help, and which module
runs it. It imports the standard library and the stdlib-only ``app.case_fields``,
``app.core.scopes`` and ``ingest.regressions`` only, so parsing works where only the
runner is installed.

Each command names the modules that run it: ``handler`` needs no server extra,
``server_handler`` does (the one that reads a database, where a command can do both);
cli/main.py imports only the one that runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeAlias

from app.case_fields import FILTERABLE
from app.core.scopes import SCOPES
from app.matrix_metrics import DEFAULT_METRIC, METRICS
from ingest.regressions import DEFAULT_THRESHOLD_PERCENT, DEFAULT_WINDOW, MIN_BASELINE_POINTS

# The type of add_subparsers()'s result: argparse names it only privately.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="moescope", description="Results database, dashboard and runner for GPU "
                                     "Mixture-of-Experts expert-parallel benchmarks.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (_serve, _db, _token, _ingest, _export, _platforms, _regressions, _alerts,
                    _model, _run, _runner):
        command(sub)
    return parser


def _serve(sub: Subparsers) -> None:
    serve = sub.add_parser("serve", help="migrate the database and serve the API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--demo", action="store_true",
                       help="load the reference GB300 report into an empty database")
    _database_option(serve)
    serve.set_defaults(server_handler="cli.serve")


def _db(sub: Subparsers) -> None:
    db = sub.add_parser("db", help="database migrations")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    up = db_sub.add_parser("upgrade", help="migrate to a revision (default: head)")
    up.add_argument("revision", nargs="?", default="head")
    down = db_sub.add_parser("downgrade", help="migrate down to a revision ('base': empty)")
    down.add_argument("revision")
    current = db_sub.add_parser("current", help="print the current revision")
    for p in (up, down, current):
        _database_option(p)
    db.set_defaults(server_handler="cli.migrations")


def _token(sub: Subparsers) -> None:
    token = sub.add_parser("token", help="API tokens")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    create = token_sub.add_parser("create", help="create a token and print it once")
    create.add_argument("name")
    create.add_argument("--scope", choices=SCOPES, required=True)
    token_list = token_sub.add_parser("list", help="list tokens (never the tokens themselves)")
    revoke = token_sub.add_parser("revoke", help="revoke a token by id or name")
    revoke.add_argument("ident", metavar="ID|NAME")
    # On each leaf, like `db`: `moescope token create NAME --database-url URL`.
    for p in (create, token_list, revoke):
        _database_option(p)
    token.set_defaults(server_handler="cli.tokens")


def _ingest(sub: Subparsers) -> None:
    ingest = sub.add_parser("ingest", help="load report files (into the database or a server)")
    ingest.add_argument("files", nargs="+", metavar="FILE", type=Path)
    ingest.add_argument("--url", help="post to this moescope server instead of the database")
    ingest.add_argument("--token", help="ingest token for --url (or MOESCOPE_TOKEN)")
    ingest.add_argument("--deadline", type=float, default=60.0, metavar="SECONDS",
                        help="how long a post to --url retries while the server is down "
                             "or busy")
    _database_option(ingest)
    ingest.set_defaults(handler="cli.ingest", server_handler="cli.ingest_database")


def _export(sub: Subparsers) -> None:
    export = sub.add_parser("export", help="one report (or two compared) as an offline HTML file")
    export.add_argument("report", nargs="?", metavar="REPORT_ID|latest",
                        help="the report to export (not with --compare)")
    export.add_argument("--compare", nargs=2, type=int, metavar=("BASE", "HEAD"),
                        help="export the comparison of two reports instead")
    for field in FILTERABLE:
        export.add_argument(f"--{field.wire}", type=field.kind, action="append", default=[],
                            choices=field.choices or None,
                            help="case filter, as the API's (repeat to match any)")
    export.add_argument("--matrix-metric", choices=tuple(METRICS), default=None,
                        help="the configuration matrix's metric shown when the file opens "
                             f"(default {DEFAULT_METRIC}; the file holds every metric's)")
    export.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="where to write (default: the export's own name, here)")
    export.add_argument("--url", help="fetch the export from this moescope server")
    export.add_argument("--token", help="read token for --url (or MOESCOPE_TOKEN)")
    _database_option(export)
    export.set_defaults(handler="cli.export", server_handler="cli.export_database")


def _platforms(sub: Subparsers) -> None:
    platforms = sub.add_parser(
        "platforms", help="reports of different GPUs side by side, matched by configuration")
    platforms.add_argument("report_ids", type=int, nargs="*", metavar="REPORT-ID",
                           help="default: the newest report of each GPU")
    platforms.add_argument("--baseline", type=int, help="one of the reports (default: first)")
    platforms.add_argument("--format", choices=("markdown", "csv"), default="markdown")
    _database_option(platforms)
    platforms.set_defaults(server_handler="cli.platforms")


def _regressions(sub: Subparsers) -> None:
    regressions = sub.add_parser(
        "regressions", help="cases of a report that moved against their history; exit 1 "
                            "when any regressed")
    regressions.add_argument("report_id", type=int, metavar="REPORT-ID")
    regressions.add_argument("--threshold", type=_positive, default=DEFAULT_THRESHOLD_PERCENT,
                             metavar="PCT", help="minimum change of layer time, percent "
                                                 "(default %(default)g)")
    regressions.add_argument("--window", type=_at_least_min_points, default=DEFAULT_WINDOW,
                             metavar="N", help="earlier points in the baseline "
                                               "(default %(default)d)")
    regressions.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                             help="text (default), JSON lines (one per flagged case), or a "
                                  "Markdown summary for a pull-request comment")
    regressions.add_argument("--json", action="store_true", help="the same as --format json")
    regressions.add_argument("--fail-on", choices=("regression", "any", "none"),
                             default="regression",
                             help="exit 1 on a regression (default), on any flagged change, "
                                  "or never")
    regressions.add_argument("--base-url", metavar="URL",
                             help="the dashboard's address, for links in --format markdown")
    regressions.add_argument("--url", help="ask this moescope server instead of the database")
    regressions.add_argument("--token", help="read token for --url (or MOESCOPE_TOKEN)")
    _database_option(regressions)
    regressions.set_defaults(handler="cli.regressions",
                             server_handler="cli.regressions_database")


def _alerts(sub: Subparsers) -> None:
    alerts = sub.add_parser("alerts", help="alerts: one per change in one report")
    alerts_sub = alerts.add_subparsers(dest="alerts_command", required=True)
    rebuild = alerts_sub.add_parser(
        "rebuild", help="recompute every alert from the stored series (triaged ones kept)")
    _database_option(rebuild)
    rebuild.set_defaults(server_handler="cli.alerts")


def _model(sub: Subparsers) -> None:
    model = sub.add_parser("model", help="the analytical model per case (no torch needed)")
    source = model.add_mutually_exclusive_group(required=True)
    source.add_argument("--matrix", type=Path, metavar="FILE", help="a matrix TOML file")
    source.add_argument("--report", type=Path, metavar="FILE", help="a report JSON file")
    model.add_argument("--check", action="store_true",
                       help="compare with the report's figures; exit 1 when a field is off")
    model.add_argument("--json", action="store_true", help="one JSON object per case")
    model.set_defaults(handler="cli.runner")


def _run(sub: Subparsers) -> None:
    run = sub.add_parser("run", help="run a matrix of MoE cases (needs moescope[runner])")
    run.add_argument("--matrix", type=Path, metavar="FILE", required=True)
    run.add_argument("--nproc", type=int, default=None,
                     help="ranks to spawn on this node (default: GPUs, or 2 on CPU); "
                          "ignored inside torchrun")
    _delivery_options(run)
    run.add_argument("--out", type=Path, metavar="FILE", help="also write the report here")
    run.set_defaults(handler="cli.runner")


def _runner(sub: Subparsers) -> None:
    runner = sub.add_parser("runner", help="runner maintenance")
    runner_sub = runner.add_subparsers(dest="runner_command", required=True)
    flush = runner_sub.add_parser("flush", help="resend what the spool holds")
    _delivery_options(flush)
    runner.set_defaults(handler="cli.runner")


def _database_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database-url", help="overrides MOESCOPE_DATABASE_URL")


def _delivery_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="moescope server (or MOESCOPE_URL)")
    parser.add_argument("--token", help="ingest token (or MOESCOPE_TOKEN)")
    parser.add_argument("--spool", type=Path, metavar="DIR",
                        help="undelivered posts (default: MOESCOPE_SPOOL, "
                             "else ~/.cache/moescope/spool)")
    parser.add_argument("--deadline", type=float, default=60.0, metavar="SECONDS",
                        help="how long one post retries before it is left in the spool")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _at_least_min_points(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < MIN_BASELINE_POINTS:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_BASELINE_POINTS}, got {text}")
    return value
