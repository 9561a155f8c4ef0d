"""``moescope`` (and ``python -m cli``): parse, then run the command's module. A command
that needs the server extra says which extra to install when it is missing, rather than
fail on an import."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence

from cli.errors import CommandError
from cli.parser import build_parser

# What the service, the dashboard, the export and their database need: the server extra.
SERVER_MODULES = ("fastapi", "uvicorn", "sqlalchemy", "alembic", "psycopg",
                  "pydantic_settings", "dash", "dash_ag_grid", "plotly", "jinja2")


def handler_module(args: argparse.Namespace) -> tuple[str, bool]:
    """The module that runs the command, and whether it needs the server extra: a command
    that can ask a server (``--url``) or read the database reads the database without it."""
    handler: str | None = getattr(args, "handler", None)
    server_handler: str | None = getattr(args, "server_handler", None)
    if server_handler and not (handler and getattr(args, "url", None)):
        return server_handler, True
    assert handler is not None, f"the parser gives {args.command} no handler"
    return handler, False


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
    module, needs_server = handler_module(args)
    if needs_server and (missing := _missing_server_module()):
        print(f"error: moescope {args.command} needs the server extra ({missing} is not "
              f"installed): pip install 'moescope[server]'", file=sys.stderr)
        return 2
    try:
        status: int = importlib.import_module(module).run(args)
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    except BrokenPipeError:
        # The reader of our output left (`moescope model --json | head`): stop quietly, as
        # the Python docs advise, with stdout pointed at devnull for the exit's flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
