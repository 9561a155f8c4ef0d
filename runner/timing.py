"""Timing windows per DESIGN.md: warm-up, then W windows of I iterations; per window the
time per iteration, the maximum over ranks (all-reduce MAX), then the median of windows.

GPU: CUDA events around the I iterations (each a CUDA-graph replay where one could be
captured). CPU: the same windows with a wall clock (``time.perf_counter``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Windows:
    per_window_ms: list[float]  # already the maximum over ranks

    @property
    def median_ms(self) -> float:
        return float(statistics.median(self.per_window_ms))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_windows(run: Callable[[], None], *, windows: int, iterations: int, warmup: int,
                 device: torch.device, group: Any,
                 setup: Callable[[], None] | None = None) -> Windows:
    """Milliseconds per iteration of ``run``; ``setup`` runs before each iteration,
    untimed (the forward pass when only the backward pass is measured)."""
    for _ in range(warmup):
        if setup:
            setup()
        run()
    _sync(device)
    measured = []
    for _ in range(windows):
        if group is not None:
            dist.barrier(group=group)
        measured.append(_window(run, setup, iterations, device))
    times = torch.tensor(measured, dtype=torch.float64)
    if group is not None:
        times = times.to(device)
        dist.all_reduce(times, op=dist.ReduceOp.MAX, group=group)
    return Windows([float(t) for t in times.cpu()])


def _window(run: Callable[[], None], setup: Callable[[], None] | None, iterations: int,
            device: torch.device) -> float:
    if device.type == "cuda":
        total = 0.0
        if setup is None:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iterations):
                run()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / iterations
        for _ in range(iterations):
            setup()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            total += float(start.elapsed_time(end))
        return total / iterations
    total = 0.0
    for _ in range(iterations):
        if setup:
            setup()
        t0 = time.perf_counter()
        run()
        total += time.perf_counter() - t0
    return total * 1e3 / iterations
