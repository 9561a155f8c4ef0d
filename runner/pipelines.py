"""The pipelines, a small registry: each builds the layer's forward ``(x, experts) -> y``
for one rank. A kernel library (DeepEP, TransformerEngine) would register another.

- standard: bf16 dispatch, experts unpadded, bf16 combine, one pass.
- staged: quantized dispatch (payload and scales as uint8) for mxfp8/nvfp4, expert groups
  padded to 128 rows, tokens in stages, software-pipelined (runner/schedule.py): on CUDA
  the dispatch of stage i+1 and the combine of stage i-1 overlap the GEMMs of stage i on
  separate streams; on the CPU the same schedule runs one op after the other.
- mega: the whole layer through ``torch.compile`` on CUDA, its collectives functional
  (traced into the graph), quantized dispatch and padded groups as staged, in one pass;
  the OOM guard around the experts is its one graph break. On CUDA the layer is then
  replayed as one CUDA graph (runner.graphs). The CPU runs it eagerly (a cold inductor
  compile takes longer than the whole test run); tests/test_runner_mega.py compiles it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import torch

from runner.layer import (
    DeviceRouting,
    ExpertFn,
    Experts,
    PassConfig,
    combine,
    dispatch,
    dispatch_wire,
    expert_rows,
    experts_grouped,
    experts_loop,
    experts_native,
    guarded_experts,
    prepare,
    recording,
    routed_pass,
)
from runner.routing import Plan, rank_routing
from runner.schedule import PHASES, Phase, handoff, pipeline_schedule, run_schedule
from runner.spec import PIPELINES

Forward = Callable[[torch.Tensor, Experts], torch.Tensor]
F = TypeVar("F", bound=Callable[..., torch.Tensor])
STAGES = 4


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


@dataclass(frozen=True)
class Pipeline:
    name: str
    build: Callable[[BuildContext], Forward]
    note: str


def expert_fn(ctx: BuildContext, native: bool = True) -> ExpertFn:
    """The experts' GEMMs: native block-scaled ones where the start-up probe ran them
    for this precision (inference only, see runner.native), else emulated, through
    ``torch._grouped_mm`` where it runs."""
    emulated = experts_grouped if ctx.grouped_mm else experts_loop
    return experts_native(emulated) if native and _runs_native(ctx) else emulated


def _runs_native(ctx: BuildContext) -> bool:
    return bool(ctx.native_scaled.get(ctx.precision))


def _routings(ctx: BuildContext, cfg: PassConfig, stages: int) -> list[DeviceRouting]:
    bounds = [ctx.tokens * s // stages for s in range(stages + 1)]
    return [prepare(rank_routing(ctx.plan, ctx.rank, range(a, b)), ctx.device, ctx.dtype,
                    cfg.pad_groups)
            for a, b in zip(bounds, bounds[1:], strict=False)]


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
    if pipeline == "standard":
        return PassConfig(ctx.precision, False, False, expert_fn(ctx), ctx.group)
    native = pipeline != "mega"
    return PassConfig(ctx.precision, ctx.precision != "bf16", True,
                      expert_fn(ctx, native=native), ctx.group,
                      wire_to_gemm=native and _runs_native(ctx))


def one_stage_routing(ctx: BuildContext, cfg: PassConfig) -> DeviceRouting:
    (routing,) = _routings(ctx, cfg, 1)
    return routing


def build_standard(ctx: BuildContext) -> Forward:
    return _one_pass(ctx, pass_config(ctx, "standard"))


def build_staged(ctx: BuildContext) -> Forward:
    return _staged(ctx, pass_config(ctx, "staged"), stages=min(STAGES, ctx.tokens))


def compiled_or_eager(fn: F, notes: list[str]) -> F:
    """``torch.compile(fn)``, falling back to ``fn`` if compiling fails, e.g. where Triton
    is missing: the rank warns, ``notes`` (the case's) says so, and the case runs eagerly
    instead of crashing the run. Compiling happens at the first call, in the build's
    warm-up on every rank alike (same code, same shapes), so the ranks fall back together.
    Running out of memory is not a compile failure: it goes on to the OOM handling. Nor is
    a failure while a CUDA graph is captured: the capture is already broken, so it goes on
    to runner.graphs, which times the (still compiled) layer eagerly and says why."""
    compiled = torch.compile(fn, dynamic=False)
    current: list[F] = [cast(F, compiled)]

    def call(*args: Any) -> torch.Tensor:
        try:
            return current[0](*args)
        except torch.OutOfMemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - any compiler failure
            if current[0] is fn or _capturing():
                raise
            message = (f"mega: torch.compile failed ({type(exc).__name__}: "
                       f"{str(exc)[:200]}); the layer ran eagerly")
            print(f"warning: {message}", file=sys.stderr)
            notes.append(message)
            current[0] = fn
            return fn(*args)

    return cast(F, call)


def _capturing() -> bool:
    # torch.cuda.is_current_stream_capturing raises on a build without CUDA.
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def build_mega(ctx: BuildContext) -> Forward:
    return mega_forward(ctx, compile=ctx.device.type == "cuda")


def mega_forward(ctx: BuildContext, compile: bool) -> Forward:
    """The whole layer (quantized dispatch, 128-row groups, experts, combine) in one pass
    through functional collectives, which torch.compile traces into its graph;
    ``compile``: compiled. The OOM guard around the experts (``guarded_experts``) is the
    one graph break: one graph up to it (dispatch, permutation), one after it (combine),
    and the experts behind it compiled on their own. The break is called from this
    frame, not from inside ``routed_pass``, because Dynamo splits every frame on the
    call stack of a break."""
    fn = expert_fn(ctx, native=False)  # torch.compile of the emulated experts
    if compile:
        torch._dynamo.reset()  # each case compiles afresh (no recompile limit across cases)
        fn = recording(fn, compiled_or_eager(fn, ctx.notes))
    cfg = PassConfig(ctx.precision, ctx.precision != "bf16", True, fn, ctx.group,
                     traceable=True)
    (r,) = _routings(ctx, cfg, 1)

    def layer(x: torch.Tensor, experts: Experts) -> torch.Tensor:
        ordered = dispatch(x, r, cfg).index_select(0, r.order)
        y = guarded_experts(ordered, r, experts, cfg)
        out = torch.zeros_like(x)
        combine(torch.empty_like(y).index_copy(0, r.order, y), r, cfg, out)
        return out

    return compiled_or_eager(layer, ctx.notes) if compile else layer


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
