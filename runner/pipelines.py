"""The pipelines, a small registry: each builds the layer's forward ``(x, experts) -> y``
for one rank. A kernel library (DeepEP, TransformerEngine) would register another.

- standard: bf16 dispatch, experts unpadded, bf16 combine, one pass.
- staged: quantized dispatch (payload and scales as uint8) for mxfp8/nvfp4, expert groups
  padded to 128 rows, tokens in stages. The stages run one after the other: overlapping
  the dispatch of stage i+1 and the combine of stage i-1 with the GEMMs of stage i on
  separate CUDA streams is not implemented yet (the notes say so).
- mega: the expert computation compiled with ``torch.compile`` on CUDA (eager on the
  CPU, where compiling is slower than the whole test), quantized dispatch and padded
  groups as staged, in one pass; on CUDA the whole layer is replayed as one CUDA graph.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from runner.layer import (
    ExpertFn,
    Experts,
    PassConfig,
    experts_grouped,
    experts_loop,
    prepare,
    routed_pass,
)
from runner.model import PIPELINES
from runner.routing import Plan, rank_routing

Forward = Callable[[torch.Tensor, Experts], torch.Tensor]
STAGES = 2


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


@dataclass(frozen=True)
class Pipeline:
    name: str
    build: Callable[[BuildContext], Forward]
    note: str


def expert_fn(ctx: BuildContext) -> ExpertFn:
    return experts_grouped if ctx.grouped_mm else experts_loop


def _one_pass(ctx: BuildContext, cfg: PassConfig, stages: int = 1) -> Forward:
    bounds = [ctx.tokens * s // stages for s in range(stages + 1)]
    routings = [prepare(rank_routing(ctx.plan, ctx.rank, range(a, b)), ctx.device, ctx.dtype,
                        cfg.pad_groups)
                for a, b in zip(bounds, bounds[1:], strict=False)]

    def forward(x: torch.Tensor, experts: Experts) -> torch.Tensor:
        out = torch.zeros_like(x)
        for routing in routings:
            routed_pass(x, routing, experts, cfg, out)
        return out

    return forward


def build_standard(ctx: BuildContext) -> Forward:
    return _one_pass(ctx, PassConfig(ctx.precision, False, False, expert_fn(ctx), ctx.group))


def build_staged(ctx: BuildContext) -> Forward:
    quantized = ctx.precision != "bf16"
    cfg = PassConfig(ctx.precision, quantized, True, expert_fn(ctx), ctx.group)
    return _one_pass(ctx, cfg, stages=min(STAGES, ctx.tokens))


def compiled_or_eager(fn: ExpertFn) -> ExpertFn:
    """``torch.compile(fn)``, falling back to ``fn`` (with a message) if compiling fails,
    e.g. where Triton is missing: a case then runs eagerly instead of crashing the run."""
    compiled = torch.compile(fn, dynamic=False)
    current: list[ExpertFn] = [compiled]

    def call(*args: Any) -> torch.Tensor:
        try:
            return current[0](*args)
        except Exception as exc:  # noqa: BLE001 - any compiler failure
            if current[0] is fn:
                raise
            print(f"warning: mega: torch.compile failed ({type(exc).__name__}: "
                  f"{str(exc)[:200]}); running eagerly", file=sys.stderr)
            current[0] = fn
            return fn(*args)

    return call


def build_mega(ctx: BuildContext) -> Forward:
    fn = expert_fn(ctx)
    if ctx.device.type == "cuda":
        fn = compiled_or_eager(fn)
    quantized = ctx.precision != "bf16"
    return _one_pass(ctx, PassConfig(ctx.precision, quantized, True, fn, ctx.group))


REGISTRY: dict[str, Pipeline] = {
    p.name: p for p in (
        Pipeline("standard", build_standard,
                 "standard: bf16 all_to_all_single dispatch and combine, unpadded experts"),
        Pipeline("staged", build_staged,
                 f"staged: quantized dispatch (uint8 payload and scales), 128-row expert "
                 f"groups, {STAGES} token stages run sequentially (no stream overlap yet)"),
        Pipeline("mega", build_mega,
                 "mega: experts through torch.compile on CUDA (eager on CPU), quantized "
                 "dispatch, 128-row groups, one pass"),
    )
}
assert tuple(REGISTRY) == PIPELINES, "runner.model.PIPELINES must list the registry"


def build_reference(ctx: BuildContext) -> Forward:
    """The same routed layer in float64, unquantized, expert by expert: the yardstick of
    the numerical check (``ctx.dtype`` should be float64)."""
    return _one_pass(ctx, PassConfig("bf16", False, False, experts_loop, ctx.group))
