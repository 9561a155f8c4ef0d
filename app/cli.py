"""The ``moescope`` command. Subcommands import what they need lazily, so the runner's
commands (model, run, runner flush; ingest, export and regressions with --url) work where
the server extra is not installed; the server's commands then say which extra to install."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

from app.export.command import add_arguments as add_export_arguments

# Standard library only, like this module: the defaults the help text shows.
from ingest.regressions import DEFAULT_THRESHOLD_PERCENT, DEFAULT_WINDOW, MIN_POINTS

REFERENCE_REPORT = "gb300-nvl72-isolated-v6.json"
# What the service, the dashboard, the export and their database need: the server extra.
SERVER_MODULES = ("fastapi", "uvicorn", "sqlalchemy", "alembic", "psycopg",
                  "pydantic_settings", "dash", "dash_ag_grid", "plotly", "jinja2")


def reference_report_text() -> str:
    return resources.files("ingest").joinpath("data", REFERENCE_REPORT).read_text("utf-8")


def _database_url(args: argparse.Namespace) -> str:
    from app.core.config import get_settings

    return str(getattr(args, "database_url", None) or get_settings().database_url)


def _unmigrated(url: str) -> str | None:
    """Why the database cannot be used as it is, or None when it is at the head."""
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    from app.core.db import engine_for
    from db.migrate import current_revision, head_revision

    try:
        current = current_revision(engine_for(url))
    except DBAPIError as exc:
        return f"cannot reach the database: {exc.__class__.__name__}: {exc.orig}"
    except SQLAlchemyError as exc:
        return f"cannot reach the database: {exc}"
    if current != head_revision():
        return (f"the database is at revision {current or 'none (empty)'}, not the head "
                f"{head_revision()}: run `moescope db upgrade` first")
    return None


def _migrated_database_url(args: argparse.Namespace) -> str | None:
    """The database URL, or None (the reason printed) when it cannot be used as it is."""
    url = _database_url(args)
    problem = _unmigrated(url)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return None
    return url


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.core.config import get_settings
    from db.migrate import upgrade

    url = _database_url(args)
    upgrade(url)
    if args.demo:
        _load_demo(url)
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


def _load_demo(url: str) -> None:
    from app.core.db import session_scope, transaction
    from app.repository import reports as reports_repo
    from app.services import reports as report_service
    from ingest.validate import parse_json

    with session_scope(url) as session, transaction(session):
        if reports_repo.count_reports(session):
            print("demo: database already holds reports; nothing loaded", file=sys.stderr)
            return
        result = report_service.ingest(session, parse_json(reference_report_text()))
        print(f"demo: loaded the reference report as id {result.id} "
              f"({result.case_count} cases)", file=sys.stderr)


def cmd_db(args: argparse.Namespace) -> int:
    from app.core.db import engine_for
    from db import migrate

    url = _database_url(args)
    if args.db_command == "upgrade":
        migrate.upgrade(url, args.revision)
    elif args.db_command == "downgrade":
        migrate.downgrade(url, args.revision)
    print(f"database at revision {migrate.current_revision(engine_for(url))} "
          f"(head {migrate.head_revision()})")
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    from app.core.db import session_scope, transaction
    from app.core.errors import NotFound
    from app.repository import tokens

    url = _migrated_database_url(args)
    if url is None:
        return 2
    with session_scope(url) as session:
        if args.token_command == "create":
            with transaction(session):
                row, token = tokens.create_token(session, args.name, args.scope)
            print(f"created token {row.id} ({row.name}, scope {row.scope}); it is shown once:",
                  file=sys.stderr)
            print(token)
        elif args.token_command == "list":
            print(f"{'id':>4}  {'name':<24} {'scope':<7} {'prefix':<11} {'created':<20} revoked")
            for row in tokens.list_tokens(session):
                revoked = row.revoked_at.isoformat(timespec="seconds") if row.revoked_at else "-"
                print(f"{row.id:>4}  {row.name:<24} {row.scope:<7} {row.prefix:<11} "
                      f"{row.created_at.isoformat(timespec='seconds'):<20} {revoked}")
        else:
            try:
                with transaction(session):
                    revoked_rows = tokens.revoke_token(session, args.ident)
            except NotFound as exc:
                print(f"error: {exc.detail}", file=sys.stderr)
                return 1
            for row in revoked_rows:
                print(f"revoked token {row.id} ({row.name})")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    files = [Path(f) for f in args.files]
    if args.url:
        from app.report_files import post_files

        return post_files(files, args.url, args.token, args.deadline)
    from app.ingest_files import store_files

    url = _database_url(args)
    problem = _unmigrated(url)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return store_files(files, url)


def cmd_export(args: argparse.Namespace) -> int:
    from app.export.command import run

    return run(args)


def cmd_regressions(args: argparse.Namespace) -> int:
    from app.regressions_command import Format, regressions_command
    from ingest.regressions import Settings

    settings = Settings(threshold_percent=args.threshold, window=args.window)
    output: Format = "json" if args.json else args.format
    shown = {"fail_on": args.fail_on, "base_url": args.base_url}
    if args.url:
        return regressions_command(args.report_id, settings, output, url=args.url,
                                   token=args.token, **shown)
    database_url = _migrated_database_url(args)
    if database_url is None:
        return 2
    return regressions_command(args.report_id, settings, output, database_url=database_url,
                               **shown)


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
    if value < MIN_POINTS:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_POINTS}, got {text}")
    return value


def cmd_model(args: argparse.Namespace) -> int:
    from runner.commands import model_command

    return model_command(args.matrix, args.report, args.check, args.json)


def cmd_run(args: argparse.Namespace) -> int:
    from runner.commands import run_command

    return run_command(args.matrix, nproc=args.nproc, url=args.url, token=args.token,
                       out=args.out, spool_dir=args.spool, deadline_s=args.deadline)


def cmd_runner(args: argparse.Namespace) -> int:
    from runner.commands import flush_command

    return flush_command(args.spool, url=args.url, token=args.token, deadline_s=args.deadline)


def _add_database_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database-url", help="overrides MOESCOPE_DATABASE_URL")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="moescope", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="migrate the database and serve the API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--demo", action="store_true",
                       help="load the reference GB300 report into an empty database")
    _add_database_option(serve)
    serve.set_defaults(func=cmd_serve)

    db = sub.add_parser("db", help="database migrations")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    up = db_sub.add_parser("upgrade", help="migrate to a revision (default: head)")
    up.add_argument("revision", nargs="?", default="head")
    down = db_sub.add_parser("downgrade", help="migrate down to a revision ('base': empty)")
    down.add_argument("revision")
    current = db_sub.add_parser("current", help="print the current revision")
    for p in (up, down, current):
        _add_database_option(p)
    db.set_defaults(func=cmd_db)

    token = sub.add_parser("token", help="API tokens")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    create = token_sub.add_parser("create", help="create a token and print it once")
    create.add_argument("name")
    create.add_argument("--scope", choices=("read", "ingest", "admin"), required=True)
    token_list = token_sub.add_parser("list", help="list tokens (never the tokens themselves)")
    revoke = token_sub.add_parser("revoke", help="revoke a token by id or name")
    revoke.add_argument("ident", metavar="ID|NAME")
    # On each leaf, like `db`: `moescope token create NAME --database-url URL`.
    for p in (create, token_list, revoke):
        _add_database_option(p)
    token.set_defaults(func=cmd_token)

    ingest = sub.add_parser("ingest", help="load report files (into the database or a server)")
    ingest.add_argument("files", nargs="+", metavar="FILE")
    ingest.add_argument("--url", help="post to this moescope server instead of the database")
    ingest.add_argument("--token", help="ingest token for --url (or MOESCOPE_TOKEN)")
    ingest.add_argument("--deadline", type=float, default=60.0, metavar="SECONDS",
                        help="how long a post to --url retries while the server is down "
                             "or busy")
    _add_database_option(ingest)
    ingest.set_defaults(func=cmd_ingest)

    export = sub.add_parser("export", help="one report (or two compared) as an offline HTML file")
    add_export_arguments(export)
    export.set_defaults(func=cmd_export)

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
    _add_database_option(regressions)
    regressions.set_defaults(func=cmd_regressions)

    model = sub.add_parser("model", help="the analytical model per case (no torch needed)")
    source = model.add_mutually_exclusive_group(required=True)
    source.add_argument("--matrix", type=Path, metavar="FILE", help="a matrix TOML file")
    source.add_argument("--report", type=Path, metavar="FILE", help="a report JSON file")
    model.add_argument("--check", action="store_true",
                       help="compare with the report's figures; exit 1 when a field is off")
    model.add_argument("--json", action="store_true", help="one JSON object per case")
    model.set_defaults(func=cmd_model)

    run = sub.add_parser("run", help="run a matrix of MoE cases (needs moescope[runner])")
    run.add_argument("--matrix", type=Path, metavar="FILE", required=True)
    run.add_argument("--nproc", type=int, default=None,
                     help="ranks to spawn on this node (default: GPUs, or 2 on CPU); "
                          "ignored inside torchrun")
    _add_delivery_options(run)
    run.add_argument("--out", type=Path, metavar="FILE", help="also write the report here")
    run.set_defaults(func=cmd_run)

    runner = sub.add_parser("runner", help="runner maintenance")
    runner_sub = runner.add_subparsers(dest="runner_command", required=True)
    flush = runner_sub.add_parser("flush", help="resend what the spool holds")
    _add_delivery_options(flush)
    runner.set_defaults(func=cmd_runner)

    return parser


def _add_delivery_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="moescope server (or MOESCOPE_URL)")
    parser.add_argument("--token", help="ingest token (or MOESCOPE_TOKEN)")
    parser.add_argument("--spool", type=Path, metavar="DIR",
                        help="undelivered posts (default: MOESCOPE_SPOOL, "
                             "else ~/.cache/moescope/spool)")
    parser.add_argument("--deadline", type=float, default=60.0, metavar="SECONDS",
                        help="how long one post retries before it is left in the spool")


def _needs_server(args: argparse.Namespace) -> bool:
    if args.command in ("ingest", "export", "regressions"):
        return not args.url  # straight from the database; through a server needs none
    return args.command in ("serve", "db", "token")


def _missing_server_module() -> str | None:
    for name in SERVER_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:
            found = False
        if not found:
            return name
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    if _needs_server(args) and (missing := _missing_server_module()):
        print(f"error: moescope {args.command} needs the server extra ({missing} is not "
              f"installed): pip install 'moescope[server]'", file=sys.stderr)
        return 2
    try:
        return func(args)
    except BrokenPipeError:
        # The reader of our output left (`moescope model --json | head`): stop quietly, as
        # the Python docs advise, with stdout pointed at devnull for the exit's flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
