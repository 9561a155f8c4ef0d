"""Phases timed inside the layer's own step (``inLayerPhaseMS``), the first view of the
phases; ``runner.phases`` times each phase alone, the second.

The layer's dispatch, experts and combine (runner.layer) call ``CLOCK.begin`` and
``CLOCK.end`` around their work, keyed by the phase and the stage's routing. On CUDA each
key owns a pair of timing events created with ``external=True``: recorded while the
step is captured they become event-record nodes of its CUDA graph (torch.cuda.Event,
cudaEventRecordExternal), so every replay of the layer's own graph stamps them, on the
stream the phase runs on (a staged layer's phases overlap on their streams). Eager
steps record the same events. On the CPU the same marks read ``time.perf_counter``
(the collectives are synchronous there). A phase's time per step is the sum over its
stages. Inside torch.compile (mega on CUDA) the marks are skipped, so a compiled
layer has no in-layer phases.

The pass (``time_in_layer``) replays the layer's own step the windows x iterations of
the case's timing, each step read after it (the events hold one replay's stamps), each
window after a barrier, per window the maximum over ranks, then the median: the layer's
own timing rules. Forward phases only: the backward's collectives run inside autograd.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from runner.matrix import Timing

Mark = tuple[str, int, float]  # phase, key, start (CPU: perf_counter seconds)


@dataclass
class PhaseClock:
    enabled: bool = False
    cuda: bool = False
    seconds: dict[str, float] = field(default_factory=dict)  # CPU: since the last read
    events: dict[tuple[str, int], tuple[Any, Any]] = field(default_factory=dict)
    note: str | None = None  # why no events could be made (CUDA)

    def start(self, device: torch.device) -> None:
        """A new case: the last case's events go (its graphs are gone by now)."""
        self.enabled, self.cuda = True, device.type == "cuda"
        self.seconds, self.events, self.note = {}, {}, None

    def stop(self) -> None:
        """No more marks; the events stay alive as long as the graphs that record them."""
        self.enabled = False

    def begin(self, phase: str, routing: object) -> Mark | None:
        if torch.compiler.is_compiling() or not self.enabled:
            return None
        key = id(routing)
        if not self.cuda:
            return phase, key, time.perf_counter()
        pair = self.events.get((phase, key)) or self._pair(phase, key)
        if pair is None:
            return None
        pair[0].record()
        return phase, key, 0.0

    def end(self, mark: Mark | None) -> None:
        if mark is None or torch.compiler.is_compiling():
            return
        phase, key, started = mark
        if not self.cuda:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - started
            return
        self.events[(phase, key)][1].record()

    def _pair(self, phase: str, key: int) -> tuple[Any, Any] | None:
        try:  # external: an event-record node when captured (torch >= 2.7)
            pair = (torch.cuda.Event(enable_timing=True,  # type: ignore[no-untyped-call]
                                     external=True),
                    torch.cuda.Event(enable_timing=True,  # type: ignore[no-untyped-call]
                                     external=True))
        except TypeError as exc:
            self.note = f"no external CUDA events in torch {torch.__version__}: {exc}"
            self.enabled = False
            return None
        self.events[(phase, key)] = pair
        return pair

    def read_ms(self) -> dict[str, float]:
        """Each phase's milliseconds in the step run since the last read (CUDA: after a
        synchronize, every stage's events of the last step)."""
        if not self.cuda:
            out = {phase: s * 1e3 for phase, s in self.seconds.items()}
            self.seconds = {}
            return out
        torch.cuda.synchronize()
        totals: dict[str, float] = {}
        for (phase, _), (start, end) in self.events.items():
            totals[phase] = totals.get(phase, 0.0) + float(start.elapsed_time(end))
        return totals


CLOCK = PhaseClock()


@dataclass(frozen=True)
class InLayerPhases:
    windows: dict[str, list[float]]  # per phase, per window: the maximum over ranks
    source: str  # how they were timed, for the case's note


def time_in_layer(step: Callable[[], object], timing: Timing, group: Any,
                  device: torch.device, flush: Callable[[], None] | None
                  ) -> InLayerPhases | None:
    """The layer's own ``step`` (its graph on CUDA) with the marks read after each
    iteration; None where no mark was recorded (a compiled layer) or the ranks saw
    different phases."""
    CLOCK.read_ms()  # drop what the timed windows left
    per_window: list[dict[str, float]] = []
    for _ in range(timing.windows):
        if group is not None:
            dist.barrier(group=group)
        sums: dict[str, float] = {}
        for _ in range(timing.iterations):
            if flush is not None:
                flush()
            step()
            for phase, ms in CLOCK.read_ms().items():
                sums[phase] = sums.get(phase, 0.0) + ms
        per_window.append({p: v / timing.iterations for p, v in sums.items()})
    names = sorted(per_window[0]) if per_window else []
    agreed = torch.tensor([len(names)], dtype=torch.int64, device=device)
    values = torch.tensor([w.get(p, 0.0) for w in per_window for p in names],
                          dtype=torch.float64, device=device)
    if group is not None:
        spread = torch.cat([agreed, -agreed])
        dist.all_reduce(spread, op=dist.ReduceOp.MAX, group=group)
        if int(spread[0]) != -int(spread[1]) or not names:
            return None
        dist.all_reduce(values, op=dist.ReduceOp.MAX, group=group)
    if not names:
        return None
    flat = [float(v) for v in values.cpu()]
    windows = {p: [flat[w * len(names) + i] for w in range(len(per_window))]
               for i, p in enumerate(names)}
    return InLayerPhases(windows, _source(device))


def _source(device: torch.device) -> str:
    if device.type != "cuda":
        return "wall clock around each phase inside the layer's eager step (CPU)"
    return ("CUDA events recorded inside the layer's step (event-record nodes of its "
            "captured graph where it replays one)")


def median_phases(windows: dict[str, list[float]]) -> dict[str, float]:
    return {p: float(statistics.median(v)) for p, v in windows.items()}
