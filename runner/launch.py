"""``moescope run``: spawn the ranks (or join torchrun's), run every case, deliver.

Rank 0 owns the report: it builds the meta, posts it (through the spool), appends each
case as it finishes, rewrites ``--out`` after every case and prints a progress line.
All ranks walk the same case list in lockstep; a case runs on ranks 0..EP-1.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.multiprocessing.spawn import spawn

from runner.execute import ERROR_BOUNDS, run_case
from runner.matrix import Matrix
from runner.model import CaseSpec
from runner.pipelines import REGISTRY
from runner.platform import (
    Platform,
    datasheet_peaks,
    detect,
    host_info,
    local_rank,
    nvlink_counters,
)
from runner.progress import Progress, progress_line
from runner.report import (
    PlatformFacts,
    RankOutcome,
    Unmeasured,
    block_size_problem,
    build_case,
    build_meta,
    check_report,
)
from runner.routing import Plan, RoutingError, build_plan
from runner.spool import Spool, SpoolError, write_atomic

if TYPE_CHECKING:
    from runner.client import Sender


@dataclass(frozen=True)
class RunOptions:
    matrix: Matrix
    url: str | None
    token: str | None
    out: Path | None
    spool_dir: Path
    deadline_s: float = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(opts: RunOptions, nproc: int | None) -> int:
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # inside torchrun
        return worker_main(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), opts)
    world = nproc or (torch.cuda.device_count() if torch.cuda.is_available() else 2)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(free_port())
    if world == 1:
        return worker_main(0, 1, opts)
    context = mp.get_context("spawn")
    status = context.SimpleQueue()
    spawn(_spawned, args=(world, opts, status), nprocs=world, join=True)
    return int(status.get()) if not status.empty() else 1


def _spawned(rank: int, world: int, opts: RunOptions, status: Any) -> None:
    os.environ["LOCAL_RANK"] = str(rank)
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


def platform_facts(plat: Platform, matrix: Matrix, world: int) -> PlatformFacts:
    sheet = datasheet_peaks(plat.gpu_name) if plat.cuda else None
    overrides = matrix.peaks
    tf = dict(sheet.tf) if sheet else {}
    tf.update(overrides.tf)
    source = ("matrix override" if overrides.tf or overrides.hbm_gbps else
              "datasheet" if sheet else "none")
    return PlatformFacts(
        gpu_name=plat.gpu_name, cuda=plat.cuda,
        host=host_info(plat, world), peaks_tf=tf,
        hbm_gbps=overrides.hbm_gbps or (sheet.hbm_gbps if sheet else None),
        nvlink_gbps_per_direction=(overrides.nvlink_gbps_per_direction
                                   or (sheet.nvlink_gbps_per_direction if sheet else None)),
        peaks_source=source,
        nvlink_readable=plat.cuda and nvlink_counters(plat.device) is not None,
    )


def _groups(world: int, eps: set[int]) -> dict[int, Any]:
    groups: dict[int, Any] = {}
    for ep in sorted(eps):
        if ep > world:
            continue
        if ep == 1:
            groups[ep] = None
        elif ep == world:
            groups[ep] = dist.group.WORLD
        else:
            groups[ep] = dist.new_group(list(range(ep)))  # every rank must call this
    return groups


def worker_main(rank: int, world: int, opts: RunOptions) -> int:
    plat = detect(local_rank())
    if not plat.cuda:
        # Ranks share the node's cores: one thread each, or they spin against each other.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    if plat.cuda:  # binding the device lets NCCL set up eagerly and barriers know it
        dist.init_process_group(plat.backend, rank=rank, world_size=world,
                                device_id=plat.device)
    else:
        dist.init_process_group(plat.backend, rank=rank, world_size=world)
    try:
        return _worker(rank, world, opts, plat)
    finally:
        dist.destroy_process_group()


def _worker(rank: int, world: int, opts: RunOptions, plat: Platform) -> int:
    matrix = opts.matrix
    groups = _groups(world, {c.ep for c in matrix.cases})
    skipped = {c.id: r for c in matrix.cases if (r := skip_reason(c, matrix, world))}
    runnable = [c for c in matrix.cases if c.id not in skipped]
    reporter: Reporter | None = None
    problem = None
    if rank == 0:
        try:
            reporter = Reporter(opts, matrix, plat, world, list(skipped.values()),
                                len(runnable))
        except (SpoolError, OSError) as exc:  # no room to keep the report, nowhere to write
            problem = str(exc)
    # Every rank learns whether rank 0 can report; otherwise its peers would only see it
    # vanish (a gloo/NCCL "connection closed" in place of the reason).
    if not _rank0_ready(problem is None, world, plat.device):
        if problem is not None:
            print(f"error: {problem}; no case ran", file=sys.stderr)
        return 1
    failures = 0
    for index, spec in enumerate(runnable, 1):
        outcomes: list[RankOutcome] = []
        if rank < spec.ep:
            plan: Plan = build_plan(matrix.shape, spec, matrix.seed)
            outcome = run_case(spec, matrix.shape, plan, matrix.timing, matrix.seed, plat,
                               rank, groups[spec.ep])
            outcomes = _gather(outcome, rank, spec.ep, groups[spec.ep], plat.device)
        dist.barrier()
        if reporter is not None:
            failures += not reporter.add(index, len(runnable), spec, outcomes)
    if reporter is None:
        return 0
    return reporter.finish(failures)


def _rank0_ready(ready: bool, world: int, device: torch.device) -> bool:
    if world == 1:
        return ready
    flag = torch.tensor([int(ready)], device=device)
    dist.broadcast(flag, src=0)
    return bool(flag.item())


def _gather(outcome: RankOutcome, rank: int, ep: int, group: Any,
            device: torch.device) -> list[RankOutcome]:
    if ep == 1:
        return [outcome]
    return [RankOutcome(**p) for p in gather_json(asdict(outcome), group, device)]


def gather_json(value: Any, group: Any, device: torch.device) -> list[Any]:
    """all_gather of JSON values through byte tensors (torch's object collectives need
    NumPy, which the runner does not)."""
    data = torch.tensor(list(json.dumps(value).encode()), dtype=torch.uint8, device=device)
    size = torch.tensor([data.numel()], dtype=torch.int64, device=device)
    world = dist.get_world_size(group)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size, group=group)
    longest = int(max(int(s) for s in sizes))
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[:data.numel()] = data
    chunks = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(chunks, padded, group=group)
    return [json.loads(bytes(c[:int(n)].cpu().tolist()).decode())
            for c, n in zip(chunks, sizes, strict=True)]


class Reporter:
    """Rank 0's side: the report, its delivery, ``--out`` and the progress lines."""

    def __init__(self, opts: RunOptions, matrix: Matrix, plat: Platform, world: int,
                 skipped: list[str], runnable: int) -> None:
        self.opts, self.matrix, self.started = opts, matrix, time.monotonic()
        self.facts = platform_facts(plat, matrix, world)
        self.run_id = f"{socket.gethostname()}-{time.strftime('%Y%m%dT%H%M%S')}-" \
                      f"{uuid.uuid4().hex[:8]}"
        pipeline_notes = [REGISTRY[p].note for p in dict.fromkeys(c.pipeline
                                                                  for c in matrix.cases)]
        graph = [] if plat.cuda else ["no CUDA graphs on the CPU: graphAccepted is null"]
        self.meta = build_meta(matrix, self.facts, self.run_id, pipeline_notes, skipped, graph)
        self.cases: list[dict[str, Any]] = []
        self.runtime_skips: list[str] = []
        self.unposted_skips: list[str] = []
        self.progress = Progress(runnable)
        for reason in skipped:
            print(f"skip {reason}", file=sys.stderr)
        self.sender: Sender | None = None
        spool = Spool(opts.spool_dir)
        if opts.url:
            from runner.client import Sender, resend_earlier  # httpx only when posting

            resend_earlier(spool, opts.token)
            self.sender = Sender(spool, opts.url, opts.token, self.meta, opts.deadline_s)
            self.sender.start()
        self._write_out()

    def add(self, index: int, total: int, spec: CaseSpec, outcomes: list[Any]) -> bool:
        """Report one case; False when it failed (invalid, undeliverable, numerics not
        accepted). Running out of memory is an outcome, not a failure: the case is
        reported with ``ooms`` counted, or skipped when none of its times was measured."""
        bound = ERROR_BOUNDS[spec.precision]
        elapsed = time.monotonic() - self.started
        try:
            case = build_case(spec, self.matrix, outcomes, self.facts, bound)
            notes = [o.graph_note for o in outcomes if getattr(o, "graph_note", None)]
            if notes and self.facts.cuda:
                case["graphNote"] = notes[0]
            if self.unposted_skips:
                # The posted meta was written before the cases ran; the next case
                # carries what was skipped since the previous one.
                case["runtimeSkipped"] = list(self.unposted_skips)
            check_report(self.meta, [*self.cases, case])
        except Unmeasured as exc:
            self.skip_at_runtime(spec, str(exc))
            self.progress.case(progress_line(index, total, spec.id, elapsed, None, str(exc)),
                               spec.id)
            return True
        except ValueError as exc:
            self.skip_at_runtime(spec, f"invalid result: {exc}")
            self.progress.case(progress_line(index, total, spec.id, elapsed, None,
                                             "invalid result"), spec.id)
            return False
        self.unposted_skips.clear()
        self.cases.append(case)
        self._write_out()
        self.progress.case(progress_line(index, total, spec.id, elapsed, case), spec.id)
        if self.sender is not None:
            try:
                self.sender.send(case)
            except SpoolError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return False
        return case["numericalAccepted"] is not False

    def skip_at_runtime(self, spec: CaseSpec, reason: str) -> None:
        self.runtime_skips.append(f"{spec.id}: {reason}")
        self.unposted_skips.append(f"{spec.id}: {reason}")
        print(f"skip {spec.id}: {reason}", file=sys.stderr)

    def _write_out(self) -> None:
        if self.opts.out is None:
            return
        meta = dict(self.meta)
        if self.runtime_skips:
            meta["runtimeSkippedNote"] = "Skipped while running: " + "; ".join(
                self.runtime_skips)
        data = json.dumps({"meta": meta, "cases": self.cases}, indent=1).encode()
        write_atomic(self.opts.out, data)

    def finish(self, failures: int) -> int:
        self.progress.close()
        self._write_out()
        if self.unposted_skips:
            print(f"note: skipped after the last posted case (in --out only): "
                  f"{'; '.join(self.unposted_skips)}", file=sys.stderr)
        code = 1 if failures else 0
        if not self.cases:  # every case skipped: nothing was measured, say so
            print("error: no case ran (see the skip lines above)", file=sys.stderr)
            code = 1
        if self.sender is not None:
            result = self.sender.close()
            if result.pending or result.rejected:
                print(f"warning: {result.pending} case(s) still spooled in "
                      f"{self.opts.spool_dir}, {result.rejected} refused; resend with "
                      f"`moescope runner flush`", file=sys.stderr)
                code = 1
        print(f"{len(self.cases)} case(s) done, {failures} failed or not accepted, "
              f"run {self.run_id}", file=sys.stderr)
        return code


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
