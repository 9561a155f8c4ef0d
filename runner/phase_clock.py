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

The backward of the same phases (``inLayerBackwardPhaseMS``) is marked in the autograd
graph the forward builds: ``into`` passes a phase's input through an identity
autograd.Function whose backward stamps the phase's backward end (the gradient leaves
the phase), ``out_of`` puts a pre-hook on the grad_fn of the phase's output that stamps
its start (the gradient enters). Autograd runs the backward of combine, experts and
dispatch in that order; on CUDA each node runs on the stream its forward ran on, so the
events land on the phase's stream, and a captured backward holds them as event-record
nodes like the forward. A backward span holds whatever autograd runs between the two
stamps: a staged layer's other stages may run inside it (on the CPU their time then
counts in the span too; on CUDA they overlap it on their streams).

The pass (``time_in_layer``) replays the layer's own step the windows x iterations of
the case's timing (training: the forward, then the backward, each after the L2 flush as
the layer's own timings run them), each step read after it (the events hold one
replay's stamps), each window after a barrier, per window the maximum over ranks, then
the median: the layer's own timing rules.
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
PASSES = ("forward", "backward")


@dataclass
class PhaseClock:
    enabled: bool = False
    cuda: bool = False
    # CPU, since the last read: per (pass, phase); a backward span's start per key
    seconds: dict[tuple[str, str], float] = field(default_factory=dict)
    opened: dict[tuple[str, int], float] = field(default_factory=dict)
    # CUDA: per (pass, phase, key) a start and an end event
    events: dict[tuple[str, str, int], tuple[Any, Any]] = field(default_factory=dict)
    note: str | None = None  # why no events could be made (CUDA)

    def start(self, device: torch.device) -> None:
        """A new case: the last case's events go (its graphs are gone by now)."""
        self.enabled, self.cuda = True, device.type == "cuda"
        self.seconds, self.opened, self.events, self.note = {}, {}, {}, None

    def stop(self) -> None:
        """No more marks; the events stay alive as long as the graphs that record them."""
        self.enabled = False

    def begin(self, phase: str, routing: object) -> Mark | None:
        if torch.compiler.is_compiling() or not self.enabled:
            return None
        key = id(routing)
        if not self.cuda:
            return phase, key, time.perf_counter()
        pair = self._pair("forward", phase, key)
        if pair is None:
            return None
        pair[0].record()
        return phase, key, 0.0

    def end(self, mark: Mark | None) -> None:
        if mark is None or torch.compiler.is_compiling():
            return
        phase, key, started = mark
        if not self.cuda:
            self._add("forward", phase, time.perf_counter() - started)
            return
        self.events[("forward", phase, key)][1].record()

    def _marks_backward(self, t: torch.Tensor) -> bool:
        # is_compiling first: torch.compile then reads nothing else (no guard on them)
        return (not torch.compiler.is_compiling() and self.enabled
                and torch.is_grad_enabled() and t.requires_grad)

    def into(self, phase: str, routing: object, x: torch.Tensor) -> torch.Tensor:
        """``x`` as the phase's input: where the backward is marked, through an identity
        whose backward stamps the end of the phase's backward."""
        if not self._marks_backward(x):
            return x
        out: torch.Tensor = _BackwardEnd.apply(  # type: ignore[no-untyped-call]
            x, self, phase, id(routing))
        return out

    def out_of(self, phase: str, routing: object, y: torch.Tensor) -> None:
        """``y``, the phase's output: its gradient arriving starts the phase's backward."""
        node = y.grad_fn if self._marks_backward(y) else None
        if node is None:
            return
        key = id(routing)
        node.register_prehook(lambda _grads: self._backward_start(phase, key))

    def _backward_start(self, phase: str, key: int) -> None:
        if not self.cuda:
            self.opened[(phase, key)] = time.perf_counter()
            return
        pair = self._pair("backward", phase, key)
        if pair is not None:
            pair[0].record()

    def backward_end(self, phase: str, key: int) -> None:
        if not self.cuda:
            started = self.opened.pop((phase, key), None)
            if started is not None:
                self._add("backward", phase, time.perf_counter() - started)
            return
        pair = self.events.get(("backward", phase, key))
        if pair is not None:  # its start was recorded
            pair[1].record()

    def _add(self, pass_: str, phase: str, seconds: float) -> None:
        self.seconds[(pass_, phase)] = self.seconds.get((pass_, phase), 0.0) + seconds

    def _pair(self, pass_: str, phase: str, key: int) -> tuple[Any, Any] | None:
        found = self.events.get((pass_, phase, key))
        if found is not None or not self.enabled:
            return found
        try:  # external: an event-record node when captured (torch >= 2.7)
            pair = (torch.cuda.Event(enable_timing=True,  # type: ignore[no-untyped-call]
                                     external=True),
                    torch.cuda.Event(enable_timing=True,  # type: ignore[no-untyped-call]
                                     external=True))
        except TypeError as exc:
            self.note = f"no external CUDA events in torch {torch.__version__}: {exc}"
            self.enabled = False
            return None
        self.events[(pass_, phase, key)] = pair
        return pair

    def read_ms(self) -> dict[tuple[str, str], float]:
        """Each (pass, phase)'s milliseconds in the step run since the last read (CUDA:
        after a synchronize, every stage's events of the last step)."""
        if not self.cuda:
            out = {name: s * 1e3 for name, s in self.seconds.items()}
            self.seconds, self.opened = {}, {}
            return out
        torch.cuda.synchronize()
        totals: dict[tuple[str, str], float] = {}
        for (pass_, phase, _), (start, end) in self.events.items():
            name = (pass_, phase)
            totals[name] = totals.get(name, 0.0) + float(start.elapsed_time(end))
        return totals


CLOCK = PhaseClock()


class _BackwardEnd(torch.autograd.Function):
    """The identity; its backward (the gradient leaving the phase through its input)
    stamps the end of the phase's backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, clock: PhaseClock, phase: str, key: int
                ) -> torch.Tensor:
        ctx.clock, ctx.phase, ctx.key = clock, phase, key
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        ctx.clock.backward_end(ctx.phase, ctx.key)
        return grad, None, None, None


@dataclass(frozen=True)
class InLayerPhases:
    windows: dict[str, list[float]]  # per phase, per window: the maximum over ranks
    source: str  # how they were timed, for the case's note
    backward: dict[str, list[float]] | None = None  # training: the backward's, alike


def time_in_layer(forward: Callable[[], object], backward: Callable[[], object] | None,
                  timing: Timing, group: Any, device: torch.device,
                  flush: Callable[[], None] | None) -> InLayerPhases | None:
    """The layer's own ``forward`` step (its graph on CUDA), then its ``backward`` where
    training, with the marks read after each iteration; None where no mark was recorded
    (a compiled layer) or the ranks saw different phases."""
    CLOCK.read_ms()  # drop what the timed windows left
    per_window: list[dict[tuple[str, str], float]] = []
    for _ in range(timing.windows):
        if group is not None:
            dist.barrier(group=group)
        sums: dict[tuple[str, str], float] = {}
        for _ in range(timing.iterations):
            for step in (forward, backward):
                if step is None:
                    continue
                if flush is not None:
                    flush()
                step()
            for name, ms in CLOCK.read_ms().items():
                sums[name] = sums.get(name, 0.0) + ms
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
    by_pass: dict[str, dict[str, list[float]]] = {p: {} for p in PASSES}
    for i, (pass_, phase) in enumerate(names):
        by_pass[pass_][phase] = [flat[w * len(names) + i] for w in range(len(per_window))]
    if not by_pass["forward"]:
        return None
    return InLayerPhases(by_pass["forward"], _source(device), by_pass["backward"] or None)


def _source(device: torch.device) -> str:
    if device.type != "cuda":
        return "wall clock around each phase inside the layer's eager step (CPU)"
    return ("CUDA events recorded inside the layer's step (event-record nodes of its "
            "captured graph where it replays one)")


def median_phases(windows: dict[str, list[float]]) -> dict[str, float]:
    return {p: float(statistics.median(v)) for p, v in windows.items()}
