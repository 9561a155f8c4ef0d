"""One case on one rank: build, check the numerics, time, account memory and NVLink.

Every rank of the case's group runs this in lockstep; the values that need all ranks
(window maxima, error norms) are reduced here, the rest is gathered by the caller.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from runner.layer import Experts, make_experts
from runner.matrix import Timing
from runner.model import CaseSpec, Shape
from runner.pipelines import REGISTRY, BuildContext, Forward, build_reference
from runner.platform import Platform, nvlink_counters
from runner.routing import Plan
from runner.timing import Windows, time_windows

# Relative error bound of the layer against its float64 reference (Frobenius norm over
# all ranks; training: the worst of the output and every gradient). bf16 rounds inputs,
# weights, the hidden activation and outputs at 2^-9; mxfp8 adds e4m3's 2^-4 steps (and
# its saturation at 448 within a block); nvfp4's e2m1 has one mantissa bit.
ERROR_BOUNDS = {"bf16": 2e-2, "mxfp8": 1.2e-1, "nvfp4": 3.5e-1}
GRAPH_TOLERANCE = 1e-3  # a graph replay against the eager result (atomics reorder sums)
NVLINK_SECONDS = 1.0


@dataclass
class RankOutcome:
    rank: int
    forward: list[float]
    combined: list[float]
    backward: list[float] | None
    numerical_error: float
    graph_accepted: bool | None
    graph_note: str | None
    rows_received: int
    rows_sent_off_rank: int
    allocated_peak_gib: float | None
    reserved_peak_gib: float | None
    allocation_retries: int
    nvlink_tx_gbps: float | None
    nvlink_rx_gbps: float | None
    notes: list[str] = field(default_factory=list)


def _draw(shape: tuple[int, ...], seed: int, device: torch.device) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(torch.bfloat16).to(device)


def relative_error(values: torch.Tensor, reference: torch.Tensor, group: Any) -> float:
    sums = torch.stack([((values.double() - reference) ** 2).sum(), (reference ** 2).sum()])
    if group is not None:
        dist.all_reduce(sums, group=group)
    diff, norm = (float(v) for v in sums.cpu())
    return 0.0 if diff == 0 else math.sqrt(diff / norm) if norm > 0 else math.inf


def _grads(x: torch.Tensor, experts: Experts) -> list[torch.Tensor]:
    out = []
    for t in (x, *experts.parameters()):
        assert t.grad is not None
        out.append(t.grad)
    return out


def _clear(x: torch.Tensor, experts: Experts) -> None:
    for t in (x, *experts.parameters()):
        t.grad = None


def run_case(spec: CaseSpec, shape: Shape, plan: Plan, timing: Timing, seed: int,
             plat: Platform, rank: int, group: Any) -> RankOutcome:
    device, training = plat.device, spec.training
    el = shape.E // spec.ep
    ctx = BuildContext(plan, rank, shape.T, spec.precision, group, device, plat.grouped_mm)
    forward = REGISTRY[spec.pipeline].build(ctx)
    experts = make_experts(shape.D, spec.F, rank * el, el, seed, torch.bfloat16, device)
    x = _draw((shape.T, shape.D), seed * 31 + rank, device)
    grad_out = _draw((shape.T, shape.D), seed * 37 + rank + 1, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    retries_before = _alloc_retries(device)

    error = _numerics(forward, ctx, experts, x, grad_out, training, group)
    graph_accepted: bool | None = None
    graph_note: str | None = None
    params = experts.parameters()
    if training:
        xg = x.clone().requires_grad_(True)
        for p in params:
            p.requires_grad_(True)
        state: dict[str, torch.Tensor] = {}

        def fwd() -> None:
            _clear(xg, experts)
            state["y"] = forward(xg, experts)

        def bwd() -> None:
            state["y"].backward(grad_out)

        def step() -> None:
            fwd()
            bwd()

        def timed(run: Callable[[], None], setup: Callable[[], None] | None = None
                  ) -> Windows:
            return time_windows(run, windows=timing.windows, iterations=timing.iterations,
                                warmup=timing.warmup, device=device, group=group, setup=setup)

        fw, bw, combined = timed(fwd), timed(bwd, setup=fwd), timed(step)
        loop = step
        graph_note = "training steps run eagerly (no CUDA graph captured for fwd+bwd)"
        forward_ms, backward_ms, combined_ms = fw, bw, combined
    else:
        with torch.no_grad():
            run, graph_accepted, graph_note = _graph_or_eager(forward, experts, x, plat, group)
            fw = time_windows(run, windows=timing.windows, iterations=timing.iterations,
                              warmup=timing.warmup, device=device, group=group)
            loop = run
        forward_ms, backward_ms, combined_ms = fw, None, fw

    if training:
        tx, rx = _nvlink(loop, combined_ms.median_ms, device)
    else:
        with torch.no_grad():
            tx, rx = _nvlink(loop, combined_ms.median_ms, device)
    allocated = reserved = None
    if device.type == "cuda":
        allocated = torch.cuda.max_memory_allocated(device) / 2**30
        reserved = torch.cuda.max_memory_reserved(device) / 2**30
    return RankOutcome(
        rank=rank, forward=forward_ms.per_window_ms, combined=combined_ms.per_window_ms,
        backward=backward_ms.per_window_ms if backward_ms else None,
        numerical_error=error, graph_accepted=graph_accepted, graph_note=graph_note,
        rows_received=plan.receive[rank],
        rows_sent_off_rank=sum(n for d, n in enumerate(plan.sends[rank]) if d != rank),
        allocated_peak_gib=allocated, reserved_peak_gib=reserved,
        allocation_retries=_alloc_retries(device) - retries_before,
        nvlink_tx_gbps=tx, nvlink_rx_gbps=rx,
    )


def _numerics(forward: Forward, ctx: BuildContext, experts: Experts, x: torch.Tensor,
              grad_out: torch.Tensor, training: bool, group: Any) -> float:
    reference_ctx = BuildContext(ctx.plan, ctx.rank, ctx.tokens, "bf16", ctx.group,
                                 ctx.device, False, torch.float64)
    reference = build_reference(reference_ctx)
    experts64 = Experts(*(p.detach().double() for p in experts.parameters()))
    x64 = x.double()
    if not training:
        with torch.no_grad():
            return relative_error(forward(x, experts), reference(x64, experts64), group)
    xm = x.clone().requires_grad_(True)
    measured = Experts(*(p.detach().clone().requires_grad_(True) for p in experts.parameters()))
    y = forward(xm, measured)
    y.backward(grad_out)
    x64.requires_grad_(True)
    for p in experts64.parameters():
        p.requires_grad_(True)
    y64 = reference(x64, experts64)
    y64.backward(grad_out.double())
    errors = [relative_error(y.detach(), y64.detach(), group)]
    for got, want in zip(_grads(xm, measured), _grads(x64, experts64), strict=True):
        errors.append(relative_error(got, want, group))
    return max(errors)


def _graph_or_eager(forward: Forward, experts: Experts, x: torch.Tensor, plat: Platform,
                    group: Any) -> tuple[Callable[[], None], bool | None, str | None]:
    def eager() -> None:
        forward(x, experts)

    if not plat.cuda:
        return eager, None, "no CUDA graphs on the CPU: graphAccepted is null"
    try:
        reference = forward(x, experts)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                forward(x, experts)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = forward(x, experts)
        graph.replay()
        torch.cuda.synchronize()
        accepted = relative_error(static_y, reference.double(), group) <= GRAPH_TOLERANCE
        return graph.replay, accepted, None
    except RuntimeError as exc:
        torch.cuda.synchronize()
        return eager, None, f"CUDA graph capture failed ({str(exc)[:200]}); timed eagerly"


def _alloc_retries(device: torch.device) -> int:
    if device.type != "cuda":
        return 0
    return int(torch.cuda.memory_stats(device).get("num_alloc_retries", 0))


def _nvlink(loop: Callable[[], None], step_ms: float, device: torch.device
            ) -> tuple[float | None, float | None]:
    """NVLink TX/RX GB/s over a loop of the step lasting at least NVLINK_SECONDS. The
    iteration count comes from the window median (the same on every rank), not from a
    clock, so the ranks' collectives stay matched."""
    if device.type != "cuda":
        return None, None
    index = device.index or 0
    before = nvlink_counters(index)
    if before is None:
        return None, None
    iterations = max(1, math.ceil(NVLINK_SECONDS * 1e3 / step_ms))
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(iterations):
        loop()
    torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    after = nvlink_counters(index)
    if after is None:
        return None, None
    return ((after[0] - before[0]) / elapsed / 1e9, (after[1] - before[1]) / elapsed / 1e9)
