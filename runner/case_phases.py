"""A case's phases on one rank (build, timings, phases, numerics, NVLink), each ended by
an agreement of the ranks: the first OOM or failure anywhere ends the case everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

from runner.oom import STATE as OOM
from runner.oom import agree, describe, free_memory, start_phase

T = TypeVar("T")


class Phases:
    """Runs a case's phases; after each, the ranks agree whether any ran out of memory or
    failed otherwise (any exception: a scaled GEMM rejecting a shape on one rank). The
    first OOM or failure anywhere ends the case on every rank (the same decision
    everywhere); the case records the failure and the run goes on."""

    def __init__(self, group: Any, device: torch.device) -> None:
        self.group, self.device = group, device
        self.ooms = 0  # this rank's
        self.failure: str | None = None  # this rank's: phase, exception type, message
        self.stopped: str | None = None  # why the case ended early

    def run(self, name: str, work: Callable[[], T]) -> T | None:
        if self.stopped:
            return None
        start_phase(name)
        result: T | None = None
        try:
            result = work()
        except torch.OutOfMemoryError:
            OOM.hit = True
        except Exception as exc:  # noqa: BLE001 - any failure, agreed below
            OOM.failure = OOM.failure or describe(exc)
        failure = OOM.failure
        local = int(OOM.hit) | int(failure is not None) << 1
        start_phase("")
        codes = agree(local, self.group, self.device)
        if not any(codes):
            return result
        self.ooms += local & 1
        if failure is not None:
            self.failure = f"{name} phase: {failure}"
        oom_ranks = ", ".join(str(r) for r, c in enumerate(codes) if c & 1)
        failed_ranks = ", ".join(str(r) for r, c in enumerate(codes) if c & 2)
        self.stopped = "; ".join(
            [*([f"out of memory in the {name} phase on rank(s) {oom_ranks}"] if oom_ranks
               else []),
             *([f"failed in the {name} phase on rank(s) {failed_ranks}"] if failed_ranks
               else [])])
        free_memory()
        return None
