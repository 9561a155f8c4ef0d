"""Timing windows per docs/metrics.md: warm-up by time, then W windows of I iterations; per
window the time per iteration, the maximum over ranks (all-reduce MAX), then the median of
windows. Each iteration's own time is kept too (the maximum over ranks per iteration), for
the tails (p50/p90/p99 over all W x I iterations, ``runner.report``).

GPU: CUDA events between the I iterations (each a CUDA-graph replay where one could be
captured), recorded back to back so iteration i is the time from event i to event i+1 and
the window is their sum; with an L2 flush or an untimed setup between iterations, a pair of
events per iteration, so the flush stays outside the timed region. CPU: the same windows
with a wall clock (``time.perf_counter``) around each iteration.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from runner.matrix import Timing
from runner.side import all_reduce_ints, barrier

# What DeepEP's and Triton's benchmarks zero between iterations: larger than any L2 yet.
FLUSH_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Windows:
    per_window_ms: list[float]  # already the maximum over ranks
    # every timed iteration, window after window, each the maximum over ranks
    per_iteration_ms: list[float]
    # This rank's own window means, before the reduction: the per-phase means over ranks
    # need them.
    rank_ms: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return float(statistics.median(self.per_window_ms))


class L2Flush:
    """A buffer bigger than L2, zeroed between timed iterations so each starts with a cold
    L2 (small-T inputs otherwise stay there). Allocated once, before a case's memory peaks
    are reset; ``nbytes`` lets the peaks leave it out."""

    def __init__(self, device: torch.device, nbytes: int = FLUSH_BYTES) -> None:
        self.buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)

    @property
    def nbytes(self) -> int:
        return self.buffer.numel()

    def __call__(self) -> None:
        self.buffer.zero_()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_windows(run: Callable[[], object], timing: Timing, *, device: torch.device, group: Any,
                 setup: Callable[[], None] | None = None,
                 flush: Callable[[], None] | None = None,
                 sampling: AbstractContextManager[Any] | None = None) -> Windows:
    """Milliseconds per iteration of ``run``. ``setup`` (the forward pass when only the
    backward pass is measured) and ``flush`` (the L2 flush) run before each timed
    iteration, untimed. ``sampling`` is entered around the timed windows only (the
    GPU-state sampler)."""
    warm_up(run, setup, timing, device, group)
    per_window: list[list[float]] = []
    with sampling or nullcontext():
        for _ in range(timing.windows):
            if group is not None:
                _sync(device)
                barrier(group)
            per_window.append(_window(run, setup, flush, timing.iterations, device))
    # One collective: the window means, then every iteration (W + W x I values).
    means = [sum(w) / len(w) for w in per_window]
    times = torch.tensor(means + [t for w in per_window for t in w], dtype=torch.float64)
    if group is not None:
        times = times.to(device)
        dist.all_reduce(times, op=dist.ReduceOp.MAX, group=group)
    values = [float(t) for t in times.cpu()]
    return Windows(values[:len(means)], values[len(means):], means)


def warm_up(run: Callable[[], object], setup: Callable[[], None] | None, timing: Timing,
            device: torch.device, group: Any) -> int:
    """``timing.warmup`` iterations (at least one), then more until the slowest rank has
    warmed up for ``timing.warmup_ms`` (clocks ramp up under load). Every round's count is
    agreed over the ranks (all-reduce MAX), since every iteration holds collectives.
    Returns the count."""
    start = time.perf_counter()
    done, more = 0, max(1, timing.warmup)
    while more:
        for _ in range(more):
            if setup:
                setup()
            run()
        done += more
        _sync(device)
        elapsed_ms = (time.perf_counter() - start) * 1e3
        more = 0
        if elapsed_ms < timing.warmup_ms:  # the time left at the mean pace so far
            more = max(1, math.ceil((timing.warmup_ms - elapsed_ms) * done / max(elapsed_ms, 1e-3)))
        if group is not None:
            more = all_reduce_ints([more], group, dist.ReduceOp.MAX)[0]
    return done


def _window(run: Callable[[], object], setup: Callable[[], None] | None,
            flush: Callable[[], None] | None, iterations: int, device: torch.device
            ) -> list[float]:
    """The milliseconds of each of ``iterations`` iterations."""
    def untimed() -> None:
        if setup:
            setup()
        if flush:
            flush()

    if device.type == "cuda":
        if setup is None and flush is None:
            # back to back: nothing but the event records between two iterations
            marks = [_event()]
            marks[0].record()
            for _ in range(iterations):
                run()
                marks.append(_event())
                marks[-1].record()
            marks[-1].synchronize()
            return [float(a.elapsed_time(b)) for a, b in zip(marks, marks[1:], strict=False)]
        pairs = []
        for _ in range(iterations):
            untimed()
            start, end = _event(), _event()
            start.record()
            run()
            end.record()
            pairs.append((start, end))
        _sync(device)
        return [float(s.elapsed_time(e)) for s, e in pairs]
    out = []
    for _ in range(iterations):
        untimed()
        t0 = time.perf_counter()
        run()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def _event() -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=True)


