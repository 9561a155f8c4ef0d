"""``moescope export``'s view and file, shared by its two sources: which view the arguments
name (checked here for both) and the file written whole. No httpx: an export from the
database (cli/export_database.py) never asks a server."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from app.case_fields import FILTERABLE, CaseFilter
from app.matrix_metrics import DEFAULT_METRIC
from cli.errors import CommandError


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



def write(path: Path, content: bytes) -> int:
    """The file appears complete or not at all: written beside it, then renamed."""
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(content)
    partial.replace(path)
    print(f"wrote {path} ({len(content):,} bytes)", file=sys.stderr)
    return 0
