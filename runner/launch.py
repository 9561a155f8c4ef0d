"""``moescope run``: spawn the ranks (or join torchrun's), run every case, deliver.

Rank 0 owns the report: it builds the meta, posts it (through the spool), appends each
case as it finishes, rewrites ``--out`` after every case and prints a progress line.
All ranks walk the same case list in lockstep; a case runs on ranks 0..EP-1.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import torch
import torch.distributed as dist

from runner.ceilings import a2a_sizes, all_to_all, measure_gpu, merge
from runner.execute import run_case
from runner.matrix import Matrix
from runner.pipelines import REGISTRY
from runner.platform import Platform, detect, local_rank, node_name
from runner.report import RankOutcome, block_size_problem
from runner.reporter import Reporter, RunOptions
from runner.routing import Plan, RoutingError, build_plan
from runner.side import all_gather_bytes, barrier, broadcast_flag, make_side_groups, wait_for_case
from runner.spec import CaseSpec
from runner.spool import SpoolError
from runner.stop import Stopped, ending, install, run_ranks, watch_parent

# A dead NCCL peer: the watchdog aborts the communicators after the group's timeout and
# the waiting call raises in Python (torch's default, 3, ends the process without a word).
NCCL_ERROR_HANDLING = "2"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(opts: RunOptions, nproc: int | None) -> int:
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # inside torchrun
        watch_parent("its torchrun agent")
        return worker_main(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), opts)
    world = nproc or (torch.cuda.device_count() if torch.cuda.is_available() else 2)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(free_port())
    if world == 1:
        return worker_main(0, 1, opts)
    # A lost rank: the others get the process group's timeout (and some) to end on their
    # own, rank 0 writing the run's failure note.
    return run_ranks(_spawned, world, (world, opts), opts.matrix.timing.timeout_s + 30)


def _spawned(rank: int, world: int, opts: RunOptions, status: Any) -> None:
    os.environ["LOCAL_RANK"] = str(rank)
    watch_parent("the moescope launcher")
    code = worker_main(rank, world, opts)
    if rank == 0:
        status.put(code)


def skip_reason(spec: CaseSpec, matrix: Matrix, world: int) -> str | None:
    if spec.ep > world:
        return f"{spec.id}: needs {spec.ep} ranks, {world} available"
    if spec.pipeline not in REGISTRY:
        return f"{spec.id}: pipeline {spec.pipeline!r} is not implemented here"
    problem = block_size_problem(matrix.shape, spec)
    if problem:
        return f"{spec.id}: {problem}"
    try:
        build_plan(matrix.shape, spec, matrix.seed)
    except RoutingError as exc:
        return f"{spec.id}: {exc}"
    return None


def _groups(world: int, eps: set[int], ep1_group: bool,
            timeout: dt.timedelta | None = None) -> dict[int, Any]:
    """The process group of each EP; ``timeout``: theirs (None: torch's default)."""
    groups: dict[int, Any] = {}
    for ep in sorted(eps):
        if ep > world:
            continue
        if ep == 1 and not ep1_group:
            groups[ep] = None
        elif ep == world:
            groups[ep] = dist.group.WORLD
        else:
            # every rank must call this
            groups[ep] = dist.new_group(list(range(ep)), timeout=timeout)
    return groups


def worker_main(rank: int, world: int, opts: RunOptions) -> int:
    plat = detect(local_rank())
    if not plat.cuda:
        # Ranks share the node's cores: one thread each, or they spin against each other.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    install(rank)
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", NCCL_ERROR_HANDLING)
    timeout = dt.timedelta(seconds=opts.matrix.timing.timeout_s)
    if plat.cuda:  # binding the device lets NCCL set up eagerly and barriers know it
        dist.init_process_group(plat.backend, rank=rank, world_size=world,
                                device_id=plat.device, timeout=timeout)
    else:
        dist.init_process_group(plat.backend, rank=rank, world_size=world, timeout=timeout)
    try:
        return _worker(rank, world, opts, plat)
    finally:
        dist.destroy_process_group()


def _worker(rank: int, world: int, opts: RunOptions, plat: Platform) -> int:
    matrix = opts.matrix
    timeout = dt.timedelta(seconds=matrix.timing.timeout_s)
    groups = _groups(world, {c.ep for c in matrix.cases}, matrix.ep1_group, timeout)
    make_side_groups(groups, world, timeout)
    skipped = {c.id: r for c in matrix.cases if (r := skip_reason(c, matrix, world))}
    runnable = [c for c in matrix.cases if c.id not in skipped]
    rank_nodes = [str(n) for n in gather_json(node_name(), dist.group.WORLD)] \
        if world > 1 else [node_name()]

    def reporter_with(ceilings: dict[str, Any] | None) -> Reporter:
        return Reporter(opts, matrix, plat, world, list(skipped.values()), len(runnable),
                        ceilings, rank_nodes)

    try:
        ceilings = measure_ceilings(rank, world, plat, matrix, runnable, groups)
    except (RuntimeError, OSError, Stopped) as exc:  # a signal or a lost peer, as in a case
        return _stopped_in_ceilings(rank, _stop_reason(exc), reporter_with)
    reporter: Reporter | None = None
    problem = None
    if rank == 0:
        try:
            reporter = reporter_with(ceilings)
        except (SpoolError, OSError) as exc:  # no room to keep the report, nowhere to write
            problem = str(exc)
    # Every rank learns whether rank 0 can report; otherwise its peers would only see it
    # vanish (a gloo/NCCL "connection closed" in place of the reason).
    if not _rank0_ready(problem is None, world):
        if problem is not None:
            print(f"error: {problem}; no case ran", file=sys.stderr)
        return 1
    failures = 0
    spec: CaseSpec | None = None
    try:
        for index, spec in enumerate(runnable, 1):
            outcomes: list[RankOutcome] = []
            if rank < spec.ep:
                plan: Plan = build_plan(matrix.shape, spec, matrix.seed)
                outcome = run_case(spec, matrix.shape, plan, matrix.timing, matrix.seed, plat,
                                   rank, groups[spec.ep], dispatch=matrix.dispatch)
                outcomes = _gather(outcome, rank, spec.ep, groups[spec.ep])
            if world > 1:
                wait_for_case()
            if reporter is not None:
                failures += not reporter.add(index, len(runnable), spec, outcomes)
    except (RuntimeError, OSError, Stopped) as exc:  # a peer is gone or hung, or a signal
        # (gloo: "connection closed by peer"; NCCL or any backend: the group's timeout_s)
        reason = _stop_reason(exc)
        if reporter is None:
            print(f"error: rank {rank} ({node_name()}): {reason}", file=sys.stderr)
            return 1
        return reporter.abort(spec, reason)
    if reporter is None:
        return 0
    return reporter.finish(failures)


def _stop_reason(exc: BaseException) -> str:
    """Why the run cannot go on: the signal's, if one came (later signals are then only
    recorded), else the error's type and first line."""
    try:
        signalled = ending()
    except Stopped as stopped:  # the handler ran on entering ending()
        signalled = str(stopped)
    return signalled or (
        f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")


def _stopped_in_ceilings(rank: int, reason: str,
                         reporter_with: Callable[[dict[str, Any] | None], Reporter]) -> int:
    """Stopped (a signal, a lost peer) while measuring the ceilings: rank 0 still writes
    the report's ``runFailureNote`` (no case had run, no ceiling is reported)."""
    if rank != 0:
        print(f"error: rank {rank} ({node_name()}): {reason}", file=sys.stderr)
        return 1
    try:
        reporter = reporter_with(None)
    except (SpoolError, OSError) as exc:
        print(f"error: {reason}; and no report could be kept: {exc}", file=sys.stderr)
        return 1
    return reporter.abort(None, reason, where="in the ceiling pass, before the first case")


def measure_ceilings(rank: int, world: int, plat: Platform, matrix: Matrix,
                     cases: list[CaseSpec], groups: dict[int, Any]) -> dict[str, Any] | None:
    """``meta.measuredCeilings`` (rank 0; None elsewhere): every rank measures its GPU's
    GEMM ceilings, each EP group in use its all-to-all (``runner.ceilings``)."""
    mine = measure_gpu(plat, matrix, cases)
    per_gpu = gather_json(mine, dist.group.WORLD) if world > 1 else [mine]
    a2a = []
    for ep in sorted({c.ep for c in cases if c.ep > 1}):  # one rank sends nothing away
        group = groups.get(ep)
        if group is not None and rank < ep:  # only a group's own ranks may call on it
            a2a.append(all_to_all(ep, group, matrix.timing, plat.device,
                                  a2a_sizes(matrix.shape, cases, ep)))
    if world > 1:
        barrier()
    return merge(per_gpu, a2a) if rank == 0 else None


def _rank0_ready(ready: bool, world: int) -> bool:
    return ready if world == 1 else broadcast_flag(ready)


def _gather(outcome: RankOutcome, rank: int, ep: int, group: Any) -> list[RankOutcome]:
    if ep == 1:
        return [outcome]
    return [RankOutcome(**p) for p in gather_json(asdict(outcome), group)]


def gather_json(value: Any, group: Any) -> list[Any]:
    """all_gather of JSON values on ``group``'s gloo side group (torch's object
    collectives need NumPy, which the runner does not)."""
    return [json.loads(b.decode()) for b in all_gather_bytes(json.dumps(value).encode(), group)]


def run_safely(opts: RunOptions, nproc: int | None) -> int:
    try:
        return launch(opts, nproc)
    except KeyboardInterrupt:  # Ctrl-C: every finished case is already kept; say where
        kept = [f"in {opts.out}"] if opts.out else []
        if opts.url:
            kept.append(f"in the spool {opts.spool_dir} until delivered "
                        f"(`moescope runner flush` resends them)")
        print(f"interrupted: the case in flight is lost; the cases finished before it are "
              f"{' and '.join(kept)}", file=sys.stderr)
        return 130
    except Exception:  # noqa: BLE001 - a crash in a rank: show it, exit non-zero
        traceback.print_exc()
        return 1
