"""One case on one rank: build, check the numerics, time, account memory and NVLink.

Every rank of the case's group runs this in lockstep; the values that need all ranks
(window maxima, error norms) are reduced here, the rest is gathered by the caller.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import torch

from runner.compiles import COMPILES
from runner.expert_kernels import EXPERT_KERNELS
from runner.experts import Experts
from runner.gpustate import Sampler
from runner.graphs import Steps, inference_steps, relative_error, training_steps
from runner.matrix import Timing
from runner.memory import MemoryStats, memory_stats
from runner.native import USAGE as NATIVE
from runner.oom import STATE as OOM
from runner.oom import agree, describe, free_memory, start_phase
from runner.phases import PhaseTimes, time_phases
from runner.pipelines import REGISTRY, BuildContext, Forward, build_reference
from runner.platform import Platform, nvlink_counters
from runner.report import RankOutcome
from runner.routing import Plan
from runner.spec import CaseSpec, Shape
from runner.timing import L2Flush, Windows, time_windows
from runner.weights import WEIGHTS, WeightKey

# Relative error bound of the layer against its float32 reference (Frobenius norm over
# all ranks; training: the worst of the output and every gradient). bf16 rounds inputs,
# weights, the hidden activation and outputs at 2^-9; mxfp8 adds e4m3's 2^-4 steps (its
# power-of-two block scale rounds up, so nothing saturates); nvfp4's e2m1 has one mantissa
# bit; fp8 (e4m3, fp32 scales of 128 elements) is mxfp8's element format.
ERROR_BOUNDS = {"bf16": 2e-2, "mxfp8": 1.2e-1, "nvfp4": 3.5e-1, "fp8": 1.2e-1}
REFERENCE_DTYPE = torch.float32
NVLINK_SECONDS = 1.0


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


def _draw(shape: tuple[int, ...], seed: int, device: torch.device) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(torch.bfloat16).to(device)


def _grads(x: torch.Tensor, experts: Experts) -> list[torch.Tensor]:
    out = []
    for t in (x, *experts.parameters()):
        assert t.grad is not None
        out.append(t.grad)
    return out


@dataclass
class _Built:
    ctx: BuildContext
    forward: Forward
    experts: Experts
    x: torch.Tensor
    grad_out: torch.Tensor


def run_case(spec: CaseSpec, shape: Shape, plan: Plan, timing: Timing, seed: int,
             plat: Platform, rank: int, group: Any, memory: MemoryStats | None = None
             ) -> RankOutcome:
    """The phases, in the order that measures the wire format's required times first
    (so an OOM later, e.g. in the reference, still leaves a reportable case): build,
    timings (training: combined, forward, backward), then the memory peaks are read, then
    per-phase timings, numerics (the float32 reference), NVLink. The GPU state is sampled
    over the layer's timed windows. ``memory``: the allocator's counters (a test's stub)."""
    device, training = plat.device, spec.training
    started = time.perf_counter()
    OOM.rank, OOM.case_id = rank, spec.id
    NATIVE.reset()
    EXPERT_KERNELS.reset()
    COMPILES.start()
    phases = Phases(group, device)
    el = shape.E // spec.ep
    weight_key = WeightKey(shape.D, spec.F, rank * el, el, seed, torch.bfloat16, device)
    native = bool(plat.native_scaled.get(spec.precision))
    WEIGHTS.keep(weight_key, spec.precision, native)  # before the peaks are reset
    # Allocated before the peaks are reset, and taken out of them: the harness's buffer.
    flush = L2Flush(device) if device.type == "cuda" and timing.flushes(training) else None
    memory = memory or memory_stats(device)
    memory.reset()
    retries_before = memory.retries()
    sampler = Sampler(device)
    first_window: list[float] = []  # when the first timed window began: set-up ends

    @contextmanager
    def sampling() -> Iterator[None]:
        if not first_window:
            first_window.append(time.perf_counter())
        with sampler:
            yield

    def build() -> _Built:
        ctx = BuildContext(plan, rank, shape.T, spec.precision, group, device, plat.grouped_mm,
                           native_scaled=plat.native_scaled, widths=(shape.D, spec.F))
        return _Built(ctx, REGISTRY[spec.pipeline].build(ctx),
                      # weights quantized once per shape and precision, never in a timed
                      # step; the last case's if it had this shape (runner.weights)
                      WEIGHTS.experts(weight_key, spec.precision, native),
                      _draw((shape.T, shape.D), seed * 31 + rank, device),
                      _draw((shape.T, shape.D), seed * 37 + rank + 1, device))

    built = phases.run("build", build)

    def timed(run: Callable[[], None], setup: Callable[[], None] | None = None) -> Windows:
        return time_windows(run, timing, device=device, group=group, setup=setup, flush=flush,
                            sampling=sampling())

    steps: Steps | None = None
    measured: tuple[Steps, Windows] | None = None
    fw = bw = combined = None
    if built is not None and training:
        b = built
        xg = b.x.clone().requires_grad_(True)
        for p in b.experts.parameters():
            p.requires_grad_(True)

        def train() -> tuple[Steps, Windows]:
            s = training_steps(b.forward, b.experts, xg, b.grad_out, plat.cuda, group)
            return s, timed(s.step)

        measured = phases.run("combined", train)
        if measured is not None:
            steps, combined = measured
            measured = None
            if steps.split is not None:  # the whole-step graph released, then the others
                steps = phases.run("graphs", steps.split)
            if steps is not None:
                fw = phases.run("forward", partial(timed, steps.forward))
            if steps is not None and steps.backward is not None:
                bw = phases.run("backward", partial(timed, steps.backward, steps.forward))
    elif built is not None:
        b = built

        def infer() -> tuple[Steps, Windows]:
            with torch.no_grad():
                s = inference_steps(b.forward, b.experts, b.x, plat.cuda, group)
                return s, timed(s.step)

        measured = phases.run("forward", infer)
        if measured is not None:
            steps, fw = measured
            combined = fw

    # The layer's peaks: before any later pass (phases, the reference) allocates more.
    allocated, reserved = memory.read(flush.nbytes if flush else 0)
    expert_kernel = EXPERT_KERNELS.kernel  # the timed passes' (the reference loops)
    fp8_scaling = EXPERT_KERNELS.scaling
    phase_times: PhaseTimes | None = None
    if built is not None and steps is not None:
        b = built
        phase_times = phases.run("phases", lambda: time_phases(b.ctx, spec.pipeline, b.experts,
                                                               b.x, timing, flush, training))
    error = None
    if built is not None:
        b = built
        error = phases.run("numerics", lambda: _numerics(b.forward, b.ctx, b.experts, b.x,
                                                         b.grad_out, training, group))
    tx = rx = None
    if steps is not None and combined is not None:
        step_loop, step_ms = steps.step, combined.median_ms

        def nvlink() -> tuple[float | None, float | None]:
            if training:
                return _nvlink(step_loop, step_ms, device)
            with torch.no_grad():
                return _nvlink(step_loop, step_ms, device)

        tx, rx = phases.run("nvlink", nvlink) or (None, None)
        del step_loop
    accepted = steps.accepted if steps else None
    compiled_graphs, compile_s = COMPILES.read()
    compiled = built is not None and built.ctx.compiled
    gpu_state, gpu_state_reason = sampler.state()
    notes = [*(built.ctx.notes if built else []), *([steps.note] if steps and steps.note else [])]
    del built, steps, measured  # the graphs and their memory pools
    if phases.stopped:
        free_memory()
    iterations = {kind: w.per_iteration_ms
                  for kind, w in (("combined", combined), ("forward", fw), ("backward", bw))
                  if w is not None}
    return RankOutcome(
        rank=rank, forward=fw.per_window_ms if fw else None,
        combined=combined.per_window_ms if combined else None,
        backward=bw.per_window_ms if bw else None,
        numerical_error=error, graph_accepted=accepted, graph_note="; ".join(notes) or None,
        rows_received=plan.receive[rank],
        rows_sent_off_rank=sum(n for d, n in enumerate(plan.sends[rank]) if d != rank),
        allocated_peak_gib=allocated, reserved_peak_gib=reserved,
        allocation_retries=memory.retries() - retries_before,
        nvlink_tx_gbps=tx, nvlink_rx_gbps=rx,
        ooms=phases.ooms, oom_note=phases.stopped, failure=phases.failure,
        emulated=spec.quantized and not NATIVE.all_native,
        **phase_outcome(phase_times),
        gpu_state=gpu_state, gpu_state_reason=gpu_state_reason,
        expert_kernel=expert_kernel, fp8_scaling=fp8_scaling,
        iterations=iterations or None,
        setup_s=first_window[0] - started if first_window else None,
        compile_s=compile_s if compiled or compiled_graphs else None,
        compiled_graphs=compiled_graphs if compiled or compiled_graphs else None,
        wall_s=time.perf_counter() - started,
    )


def phase_outcome(times: PhaseTimes | None) -> dict[str, Any]:
    """``RankOutcome``'s phase fields (plain data) from the phase pass, None without one."""
    if times is None:
        return {}
    return {
        "phase_windows": times.forward, "phase_rank_ms": times.forward_rank_ms,
        "backward_phase_windows": times.backward, "backward_phase_rank_ms": times.backward_rank_ms,
        "dispatch_local_bytes": times.dispatch.local * times.dispatch_row_bytes,
        "dispatch_remote_bytes": times.dispatch.remote * times.dispatch_row_bytes,
        "combine_local_bytes": times.combine.local * times.combine_row_bytes,
        "combine_remote_bytes": times.combine.remote * times.combine_row_bytes,
        "phase_graphs": times.graphs, "phase_graph_note": times.note,
    }


def _numerics(forward: Forward, ctx: BuildContext, experts: Experts, x: torch.Tensor,
              grad_out: torch.Tensor, training: bool, group: Any) -> float:
    # float32, not float64: the reference must fit wherever the case did (float64 copies
    # of the weights are 4x their bf16 size); its rounding (2^-24) is far below the bounds.
    reference_ctx = BuildContext(ctx.plan, ctx.rank, ctx.tokens, "bf16", ctx.group,
                                 ctx.device, False, REFERENCE_DTYPE)
    reference = build_reference(reference_ctx)
    gate, up, down = (p.detach().to(REFERENCE_DTYPE) for p in experts.parameters())
    experts_ref = Experts(gate, up, down)  # unquantized
    x_ref = x.to(REFERENCE_DTYPE)
    if not training:
        with torch.no_grad():
            return relative_error(forward(x, experts), reference(x_ref, experts_ref), group)
    xm = x.clone().requires_grad_(True)
    measured = experts.with_parameters(
        *(p.detach().clone().requires_grad_(True) for p in experts.parameters()))
    y = forward(xm, measured)
    y.backward(grad_out)
    x_ref.requires_grad_(True)
    for p in experts_ref.parameters():
        p.requires_grad_(True)
    y_ref = reference(x_ref, experts_ref)
    y_ref.backward(grad_out.to(REFERENCE_DTYPE))
    errors = [relative_error(y.detach(), y_ref.detach(), group)]
    for got, want in zip(_grads(xm, measured), _grads(x_ref, experts_ref), strict=True):
        errors.append(relative_error(got, want, group))
    return max(errors)


def _nvlink(loop: Callable[[], None], step_ms: float, device: torch.device
            ) -> tuple[float | None, float | None]:
    """NVLink TX/RX GB/s over a loop of the step lasting at least NVLINK_SECONDS. The
    iteration count comes from the window median (the same on every rank), not from a
    clock, so the ranks' collectives stay matched."""
    if device.type != "cuda":
        return None, None
    before = nvlink_counters(device)
    if before is None:
        return None, None
    iterations = max(1, math.ceil(NVLINK_SECONDS * 1e3 / step_ms))
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(iterations):
        loop()
    torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    after = nvlink_counters(device)
    if after is None:
        return None, None
    return ((after[0] - before[0]) / elapsed / 1e9, (after[1] - before[1]) / elapsed / 1e9)
