"""``moescope model``, ``run`` and ``runner flush``: the runner's commands (runner/commands.py,
torch-free until ``run`` starts ranks)."""

from __future__ import annotations

import argparse

from runner.commands import flush_command, model_command, run_command


def run(args: argparse.Namespace) -> int:
    if args.command == "model":
        return model_command(args.matrix, args.report, args.check, args.json)
    if args.command == "run":
        return run_command(args.matrix, nproc=args.nproc, url=args.url, token=args.token,
                           out=args.out, spool_dir=args.spool, deadline_s=args.deadline)
    return flush_command(args.spool, url=args.url, token=args.token, deadline_s=args.deadline)
