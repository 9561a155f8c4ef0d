"""The pipelines, a small registry: each builds the layer's forward ``(x, experts) -> y``
for one rank. A kernel library (DeepEP, TransformerEngine) would register another.

- standard: bf16 dispatch, experts unpadded, bf16 combine, one pass.
- staged: quantized dispatch (payload and scales as uint8) for mxfp8/nvfp4, expert groups
  padded to 128 rows, tokens in stages, software-pipelined (runner/schedule.py): on CUDA
  the dispatch of stage i+1 and the combine of stage i-1 overlap the GEMMs of stage i on
  separate streams; on the CPU the same schedule runs one op after the other.
- mega: the whole layer through ``torch.compile`` on CUDA, its collectives functional
  (traced into the graph), quantized dispatch and padded groups as staged, in one pass;
  the OOM guard around the experts is its one graph break; compiled once per shape, the
  routing entering as dynamic sizes (runner.compiles). On CUDA the layer is then
  replayed as one CUDA graph (runner.graphs). The CPU runs it eagerly (a cold inductor
  compile takes longer than the whole test run); tests/test_runner_mega.py compiles it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from runner.compiles import ShapeCache, compiled_or_eager, dynamic_rows, static, strict_recompiles
from runner.exchange import make_exchange
from runner.expert_kernels import experts_grouped, experts_loop, experts_native, recording
from runner.experts import ExpertFn, Experts
from runner.layer import (
    DeviceRouting,
    PassConfig,
    combine,
    dispatch,
    dispatch_wire,
    expert_rows,
    guarded_experts,
    prepare,
    routed_pass,
)
from runner.matrix import DispatchSettings
from runner.native import Operand
from runner.phase_clock import CLOCK
from runner.routing import Plan, rank_routing
from runner.schedule import PHASES, Phase, handoff, pipeline_schedule, run_schedule
from runner.spec import PIPELINES

Forward = Callable[[torch.Tensor, Experts], torch.Tensor]
STAGES = 4
STATIC_DISPATCH = DispatchSettings()


@dataclass
class BuildContext:
    plan: Plan
    rank: int
    tokens: int
    precision: str
    group: Any
    device: torch.device
    grouped_mm: bool
    dtype: torch.dtype = torch.bfloat16
    native_scaled: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the build fell back on, for the case
    widths: tuple[int, int] | None = None  # (D, F): with tokens, the layer's tensor shapes
    compiled: bool = False  # the layer runs through torch.compile (mega on CUDA)
    dispatch: DispatchSettings = STATIC_DISPATCH  # the matrix's [dispatch]


@dataclass(frozen=True)
class Pipeline:
    name: str
    build: Callable[[BuildContext], Forward]
    note: str


def expert_fn(ctx: BuildContext, native: bool = True) -> ExpertFn:
    """The experts' GEMMs: native block-scaled ones where the start-up probe ran them
    for this precision (inference; fp8 training too, see runner.fp8_autograd), else
    emulated, through ``torch._grouped_mm`` where it runs."""
    emulated = experts_grouped if ctx.grouped_mm else experts_loop
    return experts_native(emulated) if native and _runs_native(ctx) else emulated


def _runs_native(ctx: BuildContext) -> bool:
    return bool(ctx.native_scaled.get(ctx.precision))


def _routings(ctx: BuildContext, cfg: PassConfig, stages: int) -> list[DeviceRouting]:
    bounds = [ctx.tokens * s // stages for s in range(stages + 1)]
    routings = [prepare(rank_routing(ctx.plan, ctx.rank, range(a, b)), ctx.device, ctx.dtype,
                        cfg.pad_groups)
                for a, b in zip(bounds, bounds[1:], strict=False)]
    for r in routings:
        if cfg.exchange is not None:
            cfg.exchange.attach(r)
    return routings


def _one_pass(ctx: BuildContext, cfg: PassConfig) -> Forward:
    routing = one_stage_routing(ctx, cfg)

    def forward(x: torch.Tensor, experts: Experts) -> torch.Tensor:
        out = torch.zeros_like(x)
        routed_pass(x, routing, experts, cfg, out)
        return out

    return forward


def _staged(ctx: BuildContext, cfg: PassConfig, stages: int) -> Forward:
    routings = _routings(ctx, cfg, stages)
    ticks = pipeline_schedule(len(routings))
    streams: dict[Phase, torch.cuda.Stream] | None = None
    if ctx.device.type == "cuda":
        streams = {p: torch.cuda.Stream(ctx.device)  # type: ignore[no-untyped-call]
                   for p in PHASES}

    def forward(x: torch.Tensor, experts: Experts) -> torch.Tensor:
        out = torch.zeros_like(x)
        received: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        computed: dict[int, torch.Tensor] = {}

        def on(phase: Phase) -> torch.cuda.Stream | None:
            return streams[phase] if streams else None

        def do_dispatch(i: int) -> None:
            received[i] = dispatch_wire(x, routings[i], cfg)

        def do_experts(i: int) -> None:
            recv, wire = received.pop(i)
            computed[i] = expert_rows(handoff(recv, on("experts")), routings[i], experts, cfg,
                                      None if wire is None else handoff(wire, on("experts")))

        def do_combine(i: int) -> None:
            combine(handoff(computed.pop(i), on("combine")), routings[i], cfg, out)

        run_schedule(ticks, {"dispatch": do_dispatch, "experts": do_experts,
                             "combine": do_combine}, ctx.device, streams)
        return out

    return forward


def pass_config(ctx: BuildContext, pipeline: str) -> PassConfig:
    """The pipeline's formats (dispatch on the wire, expert groups, GEMMs), eager. The
    standard and staged pipelines run with it; the per-phase pass (runner.phases) times
    every pipeline's phases with it (mega's experts: the emulated GEMMs it compiles)."""
    exchange = make_exchange(ctx.dispatch.mode, ctx.dispatch.dedup, ctx.group, ctx.device)
    if pipeline == "standard":
        return PassConfig(ctx.precision, False, False, expert_fn(ctx), ctx.group,
                          exchange=exchange)
    native = pipeline != "mega"
    return PassConfig(ctx.precision, ctx.precision != "bf16", True,
                      expert_fn(ctx, native=native), ctx.group,
                      wire_to_gemm=native and _runs_native(ctx), exchange=exchange)


def gemm_layout(pipeline: str, tokens: int) -> tuple[bool, int]:
    """How a pipeline runs its expert GEMMs: (each expert's rows padded to GROUP_ROWS,
    in how many token stages), as pass_config and the builders below set them."""
    if pipeline == "standard":
        return False, 1
    return True, min(STAGES, tokens) if pipeline == "staged" else 1


def one_stage_routing(ctx: BuildContext, cfg: PassConfig) -> DeviceRouting:
    (routing,) = _routings(ctx, cfg, 1)
    return routing


def build_standard(ctx: BuildContext) -> Forward:
    return _one_pass(ctx, pass_config(ctx, "standard"))


def build_staged(ctx: BuildContext) -> Forward:
    return _staged(ctx, pass_config(ctx, "staged"), stages=min(STAGES, ctx.tokens))


# Set to 1: mega is compiled on the CPU too (bench/setup_time.py --mega measures its
# compile time there); otherwise the CPU runs it eagerly.
COMPILE_ON_CPU = "MOESCOPE_COMPILE_ON_CPU"


def build_mega(ctx: BuildContext) -> Forward:
    compile = ctx.device.type == "cuda" or os.environ.get(COMPILE_ON_CPU) == "1"
    if compile and ctx.dispatch != STATIC_DISPATCH:
        # The shape's compiled layer is shared by every case; a dynamic dispatch's host
        # sync would break its graph anyway.
        ctx.notes.append("mega runs eagerly: the compiled layer has the static dispatch "
                         "only")
        compile = False
    return mega_forward(ctx, compile=compile)


def mega_layer(x: torch.Tensor, experts: Experts, r: DeviceRouting, cfg: PassConfig
               ) -> torch.Tensor:
    """The whole layer (quantized dispatch, 128-row groups, experts, combine) in one pass
    through functional collectives, which torch.compile traces into its graph. The OOM
    guard around the experts (``guarded_experts``) is the one graph break: one graph up
    to it (dispatch, permutation), one after it (combine), and the experts behind it
    compiled on their own. The break is called from this frame, not from inside
    ``routed_pass``, because Dynamo splits every frame on the call stack of a break.
    The routing ``r`` is an argument, not a closure, so one compiled layer serves every
    routing of its shape (runner.compiles)."""
    received = CLOCK.into("experts", r, dispatch(x, r, cfg))
    mark = CLOCK.begin("experts", r)  # skipped while torch.compile traces
    ordered = received.index_select(0, r.order)
    y = guarded_experts(ordered, r, experts, cfg)
    back = torch.empty_like(y).index_copy(0, r.order, y)
    CLOCK.end(mark)
    CLOCK.out_of("experts", r, back)
    out = torch.zeros_like(x)
    combine(back, r, cfg, out)
    return out


@dataclass
class CompiledMega:
    """One shape's compiled layer and experts. ``notes``: its fallbacks to eager so far,
    which every case that runs it carries; ``case_notes``: the running case's notes."""

    cfg: PassConfig
    layer: Callable[[torch.Tensor, Experts, DeviceRouting, PassConfig], torch.Tensor]
    case_notes: list[str]
    notes: list[str] = field(default_factory=list)

    def note(self, message: str) -> None:
        self.notes.append(message)
        self.case_notes.append(message)


MEGA: ShapeCache[CompiledMega] = ShapeCache()


def mega_key(ctx: BuildContext) -> tuple[Any, ...]:
    """What fixes the compiled layer's graph: everything but the routing."""
    return (ctx.tokens, ctx.widths, ctx.plan.ep, ctx.plan.experts_per_rank, ctx.rank,
            ctx.precision, ctx.grouped_mm, ctx.device, ctx.dtype, id(ctx.group))


def _static_experts(experts: Experts) -> None:
    q = experts.quantized
    static(*experts.parameters(), *(q.emulated if q is not None else []))


def _compile_mega(ctx: BuildContext) -> CompiledMega:
    strict_recompiles()
    fn = expert_fn(ctx, native=False)  # torch.compile of the emulated experts
    holder: list[CompiledMega] = []

    def note(message: str) -> None:
        holder[0].note(message)

    compiled_experts = compiled_or_eager(fn, note, dynamic=True)

    def experts_call(rows: torch.Tensor, experts: Experts, counts: list[int],
                     offs: torch.Tensor, precision: str, on_grid: bool = False,
                     wire: Operand | None = None) -> torch.Tensor:
        dynamic_rows(rows)
        _static_experts(experts)
        static(offs)
        return compiled_experts(rows, experts, counts, offs, precision, on_grid, wire)

    cfg = PassConfig(ctx.precision, ctx.precision != "bf16", True,
                     recording(fn, experts_call), ctx.group, traceable=True)
    holder.append(CompiledMega(cfg, compiled_or_eager(mega_layer, note, dynamic=True),
                               ctx.notes))
    return holder[0]


def mega_forward(ctx: BuildContext, compile: bool) -> Forward:
    """``mega_layer`` with this case's routing; ``compile``: through the shape's compiled
    layer (``MEGA``, made at the first case of the shape), eager otherwise."""
    if not compile:
        eager_cfg = PassConfig(ctx.precision, ctx.precision != "bf16", True,
                               expert_fn(ctx, native=False), ctx.group, traceable=True,
                               exchange=make_exchange(ctx.dispatch.mode, ctx.dispatch.dedup,
                                                      ctx.group, ctx.device))
        r = one_stage_routing(ctx, eager_cfg)
        return lambda x, experts: mega_layer(x, experts, r, eager_cfg)
    ctx.compiled = True
    mega = MEGA.get(mega_key(ctx), lambda: _compile_mega(ctx))
    mega.case_notes = ctx.notes
    ctx.notes.extend(mega.notes)  # the shape fell back to eager in an earlier case
    cfg = mega.cfg
    routing = one_stage_routing(ctx, cfg)
    static(routing.token, routing.weight, routing.offs)
    dynamic_rows(routing.order, routing.pad)

    def forward(x: torch.Tensor, experts: Experts) -> torch.Tensor:
        static(x)
        _static_experts(experts)
        return mega.layer(x, experts, routing, cfg)

    return forward


REGISTRY: dict[str, Pipeline] = {
    p.name: p for p in (
        Pipeline("standard", build_standard,
                 "standard: bf16 all_to_all_single dispatch and combine, unpadded experts"),
        Pipeline("staged", build_staged,
                 f"staged: quantized dispatch (uint8 payload and scales), 128-row expert "
                 f"groups, {STAGES} token stages software-pipelined: on CUDA the dispatch "
                 f"of stage i+1 and the combine of stage i-1 overlap the expert GEMMs of "
                 f"stage i on separate streams (ordered by events); on the CPU the same "
                 f"schedule runs one op after the other"),
        Pipeline("mega", build_mega,
                 "mega: the whole layer through torch.compile on CUDA (eager on the CPU), "
                 "the quantized dispatch and the combine as functional collectives traced "
                 "into the graph, 128-row groups, one pass; one graph break, at the OOM "
                 "guard around the experts (compiled on their own); on CUDA the layer is "
                 "replayed as one CUDA graph where capture succeeds"),
    )
}
assert tuple(REGISTRY) == PIPELINES, "runner.spec.PIPELINES must list the registry"


def build_reference(ctx: BuildContext) -> Forward:
    """The same routed layer in float32, unquantized, expert by expert: the yardstick of
    the numerical check (``ctx.dtype`` should be float32)."""
    return _one_pass(ctx, PassConfig("bf16", False, False, experts_loop, ctx.group))
