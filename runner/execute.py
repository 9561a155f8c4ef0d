"""One case on one rank: build, check the numerics, time, account memory and NVLink.

Every rank of the case's group runs this in lockstep; the values that need all ranks
(window maxima, error norms) are reduced here, the rest is gathered by the caller."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from runner.case_phases import Phases
from runner.compiles import COMPILES
from runner.expert_kernels import EXPERT_KERNELS
from runner.experts import Experts
from runner.gpustate import Sampler, nvlink_gbps
from runner.graphs import NO_GRAPHS, Steps, inference_steps, relative_error, training_steps
from runner.matrix import DispatchSettings, Timing
from runner.memory import MemoryStats, memory_stats
from runner.native import USAGE as NATIVE
from runner.oom import STATE as OOM
from runner.oom import free_memory
from runner.phase_clock import CLOCK, InLayerPhases, time_in_layer
from runner.phases import PhaseTimes, phase_outcome, time_phases
from runner.pipelines import REGISTRY, BuildContext, Forward, build_reference
from runner.platform import Platform
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
STATIC = DispatchSettings()


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


@dataclass
class _Case:
    """One case on this rank while it runs: what it was given and its harness."""

    spec: CaseSpec
    shape: Shape
    plan: Plan
    timing: Timing
    seed: int
    plat: Platform
    rank: int
    group: Any
    dispatch: DispatchSettings
    phases: Phases
    flush: L2Flush | None
    memory: MemoryStats
    weight_key: WeightKey
    started: float
    sampler: Sampler
    memory_retries: int = 0  # the allocator's retries before the case
    first_window: list[float] = field(default_factory=list)  # set-up ends there

    @property
    def device(self) -> torch.device:
        return self.plat.device

    @property
    def graphs(self) -> bool:
        """CUDA graphs for the layer's steps: not with a dynamic dispatch's host sync."""
        return self.plat.cuda and self.dispatch.mode == "static"

    @contextmanager
    def sampling(self) -> Iterator[None]:
        if not self.first_window:
            self.first_window.append(time.perf_counter())
        with self.sampler:
            yield

    def timed(self, run: Callable[[], None], setup: Callable[[], None] | None = None
              ) -> Windows:
        return time_windows(run, self.timing, device=self.device, group=self.group,
                            setup=setup, flush=self.flush, sampling=self.sampling())


@dataclass
class _Layer:
    """The layer's timed steps and their windows (None: not measured)."""

    steps: Steps | None = None
    forward: Windows | None = None
    backward: Windows | None = None
    combined: Windows | None = None


def run_case(spec: CaseSpec, shape: Shape, plan: Plan, timing: Timing, seed: int,
             plat: Platform, rank: int, group: Any, memory: MemoryStats | None = None,
             dispatch: DispatchSettings = STATIC) -> RankOutcome:
    """The phases, in the order that measures the wire format's required times first
    (so an OOM later, e.g. in the reference, still leaves a reportable case): build,
    timings (training: combined, forward, backward), then the memory peaks are read, then
    the phases inside the layer's step and each alone, numerics (the float32 reference),
    NVLink. The GPU state is sampled over the layer's timed windows. ``memory``: the
    allocator's counters (a test's stub); ``dispatch``: the matrix's [dispatch]."""
    c = _start(spec, shape, plan, timing, seed, plat, rank, group, memory, dispatch)
    built = c.phases.run("build", partial(_build, c))
    layer = _Layer()
    if built is not None:
        layer = _time_training(c, built) if spec.training else _time_inference(c, built)
    # The layer's peaks: before any later pass (phases, the reference) allocates more.
    allocated, reserved = c.memory.read(c.flush.nbytes if c.flush else 0)
    expert_kernel = EXPERT_KERNELS.kernel  # the timed passes' (the reference loops)
    fp8_scaling = EXPERT_KERNELS.scaling
    in_layer = _in_layer(c, layer.steps)
    CLOCK.stop()
    phase_times: PhaseTimes | None = None
    error = None
    if built is not None:
        b = built
        if layer.steps is not None:
            phase_times = c.phases.run("phases", lambda: time_phases(
                b.ctx, spec.pipeline, b.experts, b.x, timing, c.flush, spec.training))
        error = c.phases.run("numerics", lambda: _numerics(b.forward, b.ctx, b.experts, b.x,
                                                           b.grad_out, spec.training, group))
    tx, rx = _nvlink_pass(c, layer)
    notes = [*(built.ctx.notes if built else []), *_graph_notes(c, layer.steps)]
    accepted = layer.steps.accepted if layer.steps else None
    compiled = built is not None and built.ctx.compiled
    del built, layer.steps  # the graphs and their memory pools
    if c.phases.stopped:
        free_memory()
    return _outcome(c, layer, error=error, accepted=accepted, notes=notes,
                    peaks=(allocated, reserved), nvlink=(tx, rx), expert_kernel=expert_kernel,
                    fp8_scaling=fp8_scaling, compiled=compiled, phase_times=phase_times,
                    in_layer=in_layer)


def _start(spec: CaseSpec, shape: Shape, plan: Plan, timing: Timing, seed: int,
           plat: Platform, rank: int, group: Any, memory: MemoryStats | None,
           dispatch: DispatchSettings) -> _Case:
    """The harness, set up before the case's peaks are reset: the weights and the L2
    flush buffer are allocated first and left out of them."""
    device = plat.device
    started = time.perf_counter()
    OOM.rank, OOM.case_id = rank, spec.id
    NATIVE.reset()
    EXPERT_KERNELS.reset()
    COMPILES.start()
    CLOCK.start(device)  # the last case's graphs, which recorded its events, are gone
    el = shape.E // spec.ep
    weight_key = WeightKey(shape.D, spec.F, rank * el, el, seed, torch.bfloat16, device)
    WEIGHTS.keep(weight_key, spec.precision, bool(plat.native_scaled.get(spec.precision)))
    flush = L2Flush(device) if device.type == "cuda" and timing.flushes(spec.training) \
        else None
    memory = memory or memory_stats(device)
    memory.reset()
    return _Case(spec, shape, plan, timing, seed, plat, rank, group, dispatch,
                 Phases(group, device), flush, memory, weight_key, started, Sampler(device),
                 memory.retries())


def _build(c: _Case) -> _Built:
    shape, spec, device = c.shape, c.spec, c.device
    ctx = BuildContext(c.plan, c.rank, shape.T, spec.precision, c.group, device,
                       c.plat.grouped_mm, native_scaled=c.plat.native_scaled,
                       widths=(shape.D, spec.F), dispatch=c.dispatch)
    native = bool(c.plat.native_scaled.get(spec.precision))
    return _Built(ctx, REGISTRY[spec.pipeline].build(ctx),
                  # weights quantized once per shape and precision, never in a timed
                  # step; the last case's if it had this shape (runner.weights)
                  WEIGHTS.experts(c.weight_key, spec.precision, native),
                  _draw((shape.T, shape.D), c.seed * 31 + c.rank, device),
                  _draw((shape.T, shape.D), c.seed * 37 + c.rank + 1, device))


def _time_training(c: _Case, b: _Built) -> _Layer:
    """The combined step, then (its graph released) the forward and the backward."""
    xg = b.x.clone().requires_grad_(True)
    for p in b.experts.parameters():
        p.requires_grad_(True)

    def train() -> tuple[Steps, Windows]:
        s = training_steps(b.forward, b.experts, xg, b.grad_out, c.graphs, c.group)
        return s, c.timed(s.step)

    measured = c.phases.run("combined", train)
    if measured is None:
        return _Layer()
    steps: Steps | None = measured[0]
    layer = _Layer(steps, combined=measured[1])
    del measured
    if steps is not None and steps.split is not None:  # the whole-step graph released
        steps = layer.steps = c.phases.run("graphs", steps.split)
    if steps is not None:
        layer.forward = c.phases.run("forward", partial(c.timed, steps.forward))
    if steps is not None and steps.backward is not None:
        layer.backward = c.phases.run("backward",
                                      partial(c.timed, steps.backward, steps.forward))
    return layer


def _time_inference(c: _Case, b: _Built) -> _Layer:
    def infer() -> tuple[Steps, Windows]:
        with torch.no_grad():
            s = inference_steps(b.forward, b.experts, b.x, c.graphs, c.group)
            return s, c.timed(s.step)

    measured = c.phases.run("forward", infer)
    if measured is None:
        return _Layer()
    return _Layer(measured[0], forward=measured[1], combined=measured[1])


def _in_layer(c: _Case, steps: Steps | None) -> InLayerPhases | str:
    """The phases inside the layer's own step (runner.phase_clock), forward and, when
    training, backward; or why not."""
    if steps is None:
        return "the layer was not timed"
    grad = torch.enable_grad() if c.spec.training else torch.no_grad()

    def run() -> InLayerPhases | None:
        with grad:
            return time_in_layer(steps.forward, steps.backward, c.timing, c.group,
                                 c.device, c.flush)

    timed = c.phases.run("in-layer phases", run)
    if timed is None:
        return CLOCK.note or "no phase was marked inside the layer (a compiled layer)"
    return timed


def _graph_notes(c: _Case, steps: Steps | None) -> list[str]:
    if steps is None or not steps.note:
        return []
    if c.plat.cuda and not c.graphs and steps.note == NO_GRAPHS:
        return ["dynamic dispatch: its count exchange copies the counts to the host, which "
                "no CUDA graph can hold; the layer is timed eagerly"]
    return [steps.note]


def _nvlink_pass(c: _Case, layer: _Layer) -> tuple[float | None, float | None]:
    if layer.steps is None or layer.combined is None:
        return None, None
    step_loop, step_ms = layer.steps.step, layer.combined.median_ms

    def nvlink() -> tuple[float | None, float | None]:
        if c.spec.training:
            return nvlink_gbps(step_loop, step_ms, c.device)
        with torch.no_grad():
            return nvlink_gbps(step_loop, step_ms, c.device)

    return c.phases.run("nvlink", nvlink) or (None, None)


def _outcome(c: _Case, layer: _Layer, *, error: float | None, accepted: bool | None,
             notes: list[str], peaks: tuple[float | None, float | None],
             nvlink: tuple[float | None, float | None], expert_kernel: str | None,
             fp8_scaling: str | None,
             compiled: bool, phase_times: PhaseTimes | None,
             in_layer: InLayerPhases | str) -> RankOutcome:
    compiled_graphs, compile_s = COMPILES.read()
    gpu_state, gpu_state_reason = c.sampler.state()
    fw, bw, combined = layer.forward, layer.backward, layer.combined
    iterations = {kind: w.per_iteration_ms
                  for kind, w in (("combined", combined), ("forward", fw), ("backward", bw))
                  if w is not None}
    plan, rank = c.plan, c.rank
    timed = in_layer if isinstance(in_layer, InLayerPhases) else None
    return RankOutcome(
        rank=rank, forward=fw.per_window_ms if fw else None,
        combined=combined.per_window_ms if combined else None,
        backward=bw.per_window_ms if bw else None,
        numerical_error=error, graph_accepted=accepted, graph_note="; ".join(notes) or None,
        rows_received=plan.receive[rank],
        rows_sent_off_rank=sum(n for d, n in enumerate(plan.sends[rank]) if d != rank),
        allocated_peak_gib=peaks[0], reserved_peak_gib=peaks[1],
        allocation_retries=c.memory.retries() - c.memory_retries,
        nvlink_tx_gbps=nvlink[0], nvlink_rx_gbps=nvlink[1],
        ooms=c.phases.ooms, oom_note=c.phases.stopped, failure=c.phases.failure,
        emulated=c.spec.quantized and not NATIVE.all_native,
        **phase_outcome(phase_times),
        in_layer_phase_windows=timed.windows if timed else None,
        in_layer_backward_phase_windows=timed.backward if timed else None,
        in_layer_note=timed.source if timed else str(in_layer),
        gpu_state=gpu_state, gpu_state_reason=gpu_state_reason,
        expert_kernel=expert_kernel, fp8_scaling=fp8_scaling,
        iterations=iterations or None,
        setup_s=c.first_window[0] - c.started if c.first_window else None,
        compile_s=compile_s if compiled or compiled_graphs else None,
        compiled_graphs=compiled_graphs if compiled or compiled_graphs else None,
        wall_s=time.perf_counter() - c.started,
    )


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
