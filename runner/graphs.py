"""What the timings replay: CUDA graphs of the measured steps where they can be captured,
the eager steps otherwise, and whether a replay gives the eager result (graphAccepted).

Capture follows PyTorch's CUDA-graph notes: a few eager iterations on a side stream
(lazy initialisation, cuBLAS workspaces, NCCL communicators), then the capture on that
same stream (``torch.cuda.make_graphed_callables`` does the same). Inference captures the
forward pass. Training captures the whole step, forward + backward ("whole-network
capture"), times it, then releases it (``Steps.split``) and captures the forward and the
backward as two graphs in one memory pool, in the order they replay, as
``make_graphed_callables`` does: the three graphs and their pools are never alive at
once, so their memory does not add up in the case's peaks. Forward, backward and combined
are each timed as replays. Gradients come out of
``torch.autograd.grad`` as the graphs' static outputs (nothing accumulates into
``.grad``).

The layer's collectives are inside the graphs, so every rank must take the same path:
the ranks all-reduce whether their capture succeeded and time eagerly together if any
failed (the graph note says why). On the CPU there are no graphs: the eager steps run
and graphAccepted is null.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from runner.experts import Experts
from runner.oom import STATE as OOM
from runner.oom import describe, free_memory
from runner.side import all_reduce_ints

GRAPH_TOLERANCE = 1e-3  # a graph replay against the eager result (atomics reorder sums)
WARMUP = 3
NO_GRAPHS = "no CUDA graphs on the CPU: graphAccepted is null"

T = TypeVar("T")
Layer = Callable[[torch.Tensor, Experts], torch.Tensor]


@dataclass
class Steps:
    """The timed work: ``backward`` needs ``forward`` run before it (its untimed setup)."""

    forward: Callable[[], None]
    backward: Callable[[], None] | None  # None for inference
    step: Callable[[], None]  # the combined step (inference: the forward pass)
    accepted: bool | None  # the replays gave the eager results (None: no graphs)
    note: str | None
    # Training on CUDA: release the whole-step graph, then capture the forward and the
    # backward graphs (never all three alive at once); None where there is nothing to split.
    split: Callable[[], Steps] | None = None


def relative_error(values: torch.Tensor, reference: torch.Tensor, group: Any) -> float:
    """Relative Frobenius error of ``values`` against ``reference`` over all ranks."""
    want = reference.double()
    sums = torch.stack([((values.double() - want) ** 2).sum(), (want ** 2).sum()])
    if group is not None:
        dist.all_reduce(sums, group=group)
    diff, norm = (float(v) for v in sums.cpu())
    return 0.0 if diff == 0 else math.sqrt(diff / norm) if norm > 0 else math.inf


def inference_steps(forward: Layer, experts: Experts, x: torch.Tensor, cuda: bool,
                    group: Any) -> Steps:
    """Call under ``torch.no_grad()``."""
    def eager() -> None:
        forward(x, experts)

    if not cuda:
        return Steps(eager, None, eager, None, NO_GRAPHS)
    reference = [forward(x, experts).clone()]
    side = torch.cuda.Stream()

    def capture() -> tuple[torch.cuda.CUDAGraph, list[torch.Tensor]]:
        graph, y = _captured(lambda: forward(x, experts), side, WARMUP)
        return graph, [y]

    captured, note = agree_on_capture(capture, group, x.device)
    if captured is None:
        return Steps(eager, None, eager, None, note)
    graph, outputs = captured
    return Steps(graph.replay, None, graph.replay,
                 _replays_match([(graph.replay, outputs)], reference, group), None)


@dataclass
class _Training:
    """One training case's eager step: the forward keeps its output for the backward."""

    forward: Layer
    experts: Experts
    x: torch.Tensor
    grad_out: torch.Tensor
    inputs: list[torch.Tensor]
    live: dict[str, torch.Tensor] = field(default_factory=dict)

    def eager_forward(self) -> None:
        for t in self.inputs:
            t.grad = None
        self.live["y"] = self.forward(self.x, self.experts)

    def eager_backward(self) -> None:
        self.live.pop("y").backward(self.grad_out)

    def eager_step(self) -> None:
        self.eager_forward()
        self.eager_backward()

    def eager(self, accepted: bool | None, note: str | None) -> Steps:
        return Steps(self.eager_forward, self.eager_backward, self.eager_step, accepted, note)

    def step(self) -> list[torch.Tensor]:
        y = self.forward(self.x, self.experts)
        return [y, *torch.autograd.grad(y, self.inputs, self.grad_out)]


def training_steps(forward: Layer, experts: Experts, x: torch.Tensor,
                   grad_out: torch.Tensor, cuda: bool, group: Any) -> Steps:
    """``x`` and the experts' weights require grad."""
    t = _Training(forward, experts, x, grad_out, [x, *experts.parameters()])
    if not cuda:
        return t.eager(None, NO_GRAPHS)
    reference = [v.detach().clone() for v in t.step()]
    side = torch.cuda.Stream()
    # The whole-step graph lives here only, so split() can release it (and its pool).
    held: dict[str, Any] = {}

    captured, note = agree_on_capture(lambda: _captured(t.step, side, WARMUP), group, x.device)
    if captured is None:
        return t.eager(None, note)
    held["graph"], step_out = captured
    step_accepted = _replays_match([(lambda: held["graph"].replay(), step_out)], reference,
                                   group)
    del captured, step_out

    def split() -> Steps:
        held.clear()
        return _split_steps(t, side, step_accepted, reference, group)

    return Steps(t.eager_forward, t.eager_backward, lambda: held["graph"].replay(),
                 step_accepted, None, split)


def _split_steps(t: _Training, side: torch.cuda.Stream, step_accepted: bool | None,
                 reference: list[torch.Tensor], group: Any) -> Steps:
    """The forward and the backward as two graphs of one pool, once the whole-step graph
    is released; eager where a rank cannot capture them."""
    torch.cuda.synchronize(t.x.device)
    free_memory()

    def split_capture() -> tuple[torch.cuda.CUDAGraph, torch.cuda.CUDAGraph, list[torch.Tensor]]:
        pool = torch.cuda.graph_pool_handle()
        # The step's warm-up ran these kernels already; the backward graph differentiates
        # the forward graph's static output.
        fwd_graph, y = _captured(lambda: t.forward(t.x, t.experts), side, 0, pool)
        bwd_graph, grads = _captured(lambda: torch.autograd.grad(y, t.inputs, t.grad_out),
                                     side, 0, pool)
        return fwd_graph, bwd_graph, [y.detach(), *grads]

    graphs, split_note = agree_on_capture(split_capture, group, t.x.device)
    if graphs is None:
        return t.eager(step_accepted, split_note)
    fwd_graph, bwd_graph, split_out = graphs

    def forward_then_backward() -> None:
        fwd_graph.replay()
        bwd_graph.replay()

    accepted = step_accepted and _replays_match([(forward_then_backward, split_out)],
                                                reference, group)
    return Steps(fwd_graph.replay, bwd_graph.replay, forward_then_backward, accepted, None)


def _captured(work: Callable[[], T], side: torch.cuda.Stream, warmup: int,
              pool: Any = None) -> tuple[torch.cuda.CUDAGraph, T]:
    """``work`` run ``warmup`` times on ``side``, then captured there; its result holds
    the graph's static outputs."""
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            work()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, stream=side):
        result = work()
    return graph, result


def agree_on_capture(capture: Callable[[], T], group: Any, device: torch.device
                   ) -> tuple[T | None, str | None]:
    """``capture()`` where it succeeded on every rank, else None and the reason. An OOM
    counts as a failure here (and is flagged for the phase's OOM agreement), so that
    every rank still reaches the all-reduce that decides."""
    result: T | None = None
    note = None
    failed_before = OOM.failure is not None
    try:
        result = capture()
    except torch.OutOfMemoryError:
        OOM.hit = True
        note = "out of memory during CUDA graph capture; timed eagerly"
    except Exception as exc:  # noqa: BLE001 - any capture failure: time eagerly
        note = f"CUDA graph capture failed ({describe(exc)[:200]}); timed eagerly"
    if OOM.failure is not None and not failed_before:
        # The guarded expert work failed during the capture (or its warm-up) and handed
        # zeros on: the graph holds a failed step. Time eagerly, where a failure that
        # recurs is the case's own.
        note = note or f"CUDA graph capture failed ({OOM.failure[:200]}); timed eagerly"
        result, OOM.failure = None, None
    if result is None and device.type == "cuda":
        torch.cuda.synchronize(device)
        free_memory()
    ok = int(result is not None)
    if group is not None:
        ok = all_reduce_ints([ok], group, dist.ReduceOp.MIN)[0]
    if ok:
        return result, None
    return None, note or "CUDA graph capture failed on another rank; timed eagerly"


def _replays_match(replays: Sequence[tuple[Callable[[], None], list[torch.Tensor]]],
                   reference: list[torch.Tensor], group: Any) -> bool:
    """Each replay's static outputs against the eager ``reference``, within
    GRAPH_TOLERANCE on every tensor (over all ranks)."""
    errors = []
    for replay, outputs in replays:
        replay()
        torch.cuda.synchronize()
        errors += [relative_error(got, want.double(), group)
                   for got, want in zip(outputs, reference, strict=True)]
    return max(errors) <= GRAPH_TOLERANCE
