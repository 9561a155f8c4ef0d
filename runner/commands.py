"""Bodies of the runner's ``moescope`` subcommands, called lazily from cli/main.py.

Torch-free: ``model`` and ``runner flush`` work where torch is not installed; ``run``
imports the execution modules only when called.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ingest.validate import InvalidPayload
from runner.matrix import MatrixError, load_matrix
from runner.model import ModelError
from runner.modelcheck import (
    capacity_factor_of,
    compare_report,
    format_check,
    load_report,
    model_lines,
    model_table,
    shape_of,
    spec_of,
)
from runner.spec import SpecError


def model_command(matrix: Path | None, report: Path | None, check: bool, as_json: bool) -> int:
    if check and report is None:
        print("error: --check compares with a report's figures: give --report FILE",
              file=sys.stderr)
        return 2
    try:
        if report is not None:
            loaded = load_report(report)
            shape, specs = shape_of(loaded), [spec_of(c) for c in loaded.cases]
            factor = capacity_factor_of(loaded)
        else:
            assert matrix is not None
            m = load_matrix(matrix)
            shape, specs, factor = m.shape, m.cases, m.capacity_factor
        if check:
            result = compare_report(loaded)
            for line in format_check(result):
                print(line)
            if result.failed:
                names = ", ".join(f.name for f in result.failed)
                print(f"model check FAILED: {names} off by >= 1e-9", file=sys.stderr)
                return 1
            return 0
        for line in (model_lines if as_json else model_table)(shape, specs, factor):
            print(line)
    except BrokenPipeError:
        raise  # the reader left (`| head`): not a file error; the command line handles it
    except (MatrixError, SpecError, ModelError, InvalidPayload, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def run_command(matrix: Path, *, nproc: int | None, url: str | None, token: str | None,
                out: Path | None, spool_dir: Path | None, deadline_s: float = 60.0) -> int:
    from runner.http import resolve_token, resolve_url
    from runner.spool import default_spool_dir

    if nproc is not None and nproc < 1:
        print(f"error: --nproc must be at least 1, got {nproc}", file=sys.stderr)
        return 2
    try:
        loaded = load_matrix(matrix)
    except (MatrixError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        from runner.launch import run_safely
        from runner.reporter import RunOptions
    except ImportError as exc:
        print(f"error: moescope run needs torch (pip install 'moescope[runner]'): {exc}",
              file=sys.stderr)
        return 2
    target = resolve_url(url)
    if out is None and target is None:
        print("error: give --out FILE and/or --url URL (or MOESCOPE_URL): the results "
              "must go somewhere", file=sys.stderr)
        return 2
    opts = RunOptions(loaded, target, resolve_token(token), out,
                      spool_dir or default_spool_dir(), deadline_s)
    return run_safely(opts, nproc)


def flush_command(spool_dir: Path | None, *, url: str | None, token: str | None,
                  deadline_s: float = 60.0) -> int:
    from runner.client import flush_spool
    from runner.http import resolve_token, resolve_url
    from runner.spool import Spool, SpoolError, default_spool_dir

    spool = Spool(spool_dir or default_spool_dir())
    try:
        result = flush_spool(spool, resolve_url(url), resolve_token(token), deadline_s)
    except SpoolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"spool {spool.root}: {result.delivered} case(s) delivered, {result.rejected} "
          f"refused by the service, {result.pending} still pending")
    for problem in dict.fromkeys(result.problems):
        print(f"  {problem}", file=sys.stderr)
    return 0 if not result.pending and not result.rejected else 1
