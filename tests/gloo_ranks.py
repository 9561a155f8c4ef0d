"""One gloo process group of real ranks, started once and shared by the runner's tests
that run their code on every rank (fixture ``gloo_pair`` in conftest.py).

Starting two ranks costs seconds (each a Python start-up and the runner's and the test
module's imports) where the code they then run takes a fraction of a second; a group per
test was most of those tests' time. A task is a module-level function, called on every
rank as ``fn(rank, *args)`` with the group initialised (``dist.group.WORLD``); it must
leave its process as it found it (undo its patches, no new default group). A task that
fails on any rank, or a rank that dies or hangs, ends the group: the test fails with each
rank's traceback and the next task starts a fresh group.
"""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
import queue
import time
import traceback
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from types import TracebackType
from typing import Any

from live import free_port

TASK_TIMEOUT_S = 600.0  # a whole task on every rank, on a loaded CI machine
GROUP_TIMEOUT_S = 300  # a rank left waiting in a collective by a failed peer gives up
FAILED_PEERS_S = 5.0  # after one rank failed, how long the others get to say how


def _serve(rank: int, world: int, port: int, tasks: Queue[Any], results: Queue[Any]) -> None:
    import torch
    import torch.distributed as dist

    # The ranks share the machine's cores: one intra-op thread each, or their OpenMP
    # threads spin against each other (a 4-rank run took 13x longer with the default).
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=dt.timedelta(seconds=GROUP_TIMEOUT_S))
    try:
        while (task := tasks.get()) is not None:
            fn, args = task
            try:
                results.put((rank, fn(rank, *args), None))
            except BaseException:  # noqa: BLE001 - every failure goes back to the test
                results.put((rank, None, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


class GlooRanks:
    """``world`` ranks, started at the first ``run`` (a session that needs none pays
    nothing) and again after a failed task."""

    def __init__(self, world: int) -> None:
        self.world = world
        self.procs: list[BaseProcess] = []
        self.tasks: list[Queue[Any]] = []
        self.results: Queue[Any] | None = None

    def __enter__(self) -> GlooRanks:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        port = free_port()
        self.tasks = [ctx.Queue() for _ in range(self.world)]
        self.results = ctx.Queue()
        self.procs = [ctx.Process(target=_serve, name=f"gloo-rank{rank}",
                                  args=(rank, self.world, port, self.tasks[rank],
                                        self.results))
                      for rank in range(self.world)]
        for proc in self.procs:
            proc.start()

    def run(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """``fn(rank, *args)`` on every rank; what each returned, in rank order."""
        if not self.procs:
            self._start()
        try:
            for tasks in self.tasks:
                tasks.put((fn, args))
            returned, failures = self._collect()
        except BaseException:
            self.close()
            raise
        if failures:
            self.close()
            raise AssertionError(f"{fn.__name__} failed on a gloo rank:\n" +
                                 "\n".join(failures))
        return returned

    def _collect(self) -> tuple[list[Any], list[str]]:
        assert self.results is not None
        returned: dict[int, Any] = {}
        failures: list[str] = []
        deadline = time.monotonic() + TASK_TIMEOUT_S
        while len(returned) + len(failures) < self.world:
            try:
                rank, value, failure = self.results.get(timeout=1)
            except queue.Empty:
                dead = [p.name for p in self.procs if not p.is_alive()]
                if dead or time.monotonic() > deadline:
                    failures.append(f"ended: {dead}" if dead else
                                    "no answer from the other ranks in time")
                    break
                continue
            if failure is None:
                returned[rank] = value
            else:  # its peers may wait in a collective for GROUP_TIMEOUT_S: not that long
                failures.append(f"rank {rank}:\n{failure}")
                deadline = min(deadline, time.monotonic() + FAILED_PEERS_S)
        return [returned.get(r) for r in range(self.world)], failures

    def close(self) -> None:
        for tasks, proc in zip(self.tasks, self.procs, strict=True):
            if proc.is_alive():
                tasks.put(None)
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self.procs, self.tasks, self.results = [], [], None
