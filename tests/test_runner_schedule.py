"""The staged pipeline's schedule (which op of which stage runs when) and its CPU run,
which issues the same ops in the same order as the GPU's streams do."""

from __future__ import annotations

import pytest
import torch

from runner.expert_kernels import experts_loop
from runner.experts import make_experts
from runner.layer import PassConfig, prepare, routed_pass
from runner.pipelines import BuildContext, build_staged
from runner.routing import build_plan, rank_routing
from runner.schedule import pipeline_schedule, run_schedule
from runner.spec import CaseSpec, Shape


def test_three_stages_overlap_transfers_with_the_experts() -> None:
    assert pipeline_schedule(3) == [
        [("dispatch", 0)],
        [("dispatch", 1), ("experts", 0)],
        [("dispatch", 2), ("combine", 0), ("experts", 1)],
        [("combine", 1), ("experts", 2)],
        [("combine", 2)],
    ]


@pytest.mark.parametrize("stages", [1, 2, 5])
def test_each_stage_goes_dispatch_experts_combine_in_consecutive_ticks(stages: int) -> None:
    ticks = pipeline_schedule(stages)
    assert len(ticks) == stages + 2
    where = {op: t for t, tick in enumerate(ticks) for op in tick}
    assert len(where) == sum(len(tick) for tick in ticks) == 3 * stages  # each op once
    for s in range(stages):
        assert where[("experts", s)] == where[("dispatch", s)] + 1
        assert where[("combine", s)] == where[("experts", s)] + 1
        if s + 1 < stages:  # the next dispatch is in flight while these GEMMs run
            assert ("dispatch", s + 1) in ticks[where[("experts", s)]]
        if s >= 1:  # and so is the previous combine
            assert ("combine", s - 1) in ticks[where[("experts", s)]]
    with pytest.raises(ValueError, match="stages must be at least 1"):
        pipeline_schedule(0)


def test_the_cpu_runs_the_ticks_in_issue_order() -> None:
    ran: list[tuple[str, int]] = []
    ops = {p: (lambda i, p=p: ran.append((p, i))) for p in ("dispatch", "experts", "combine")}
    ticks = pipeline_schedule(4)
    run_schedule(ticks, ops, torch.device("cpu"))  # type: ignore[arg-type]
    assert ran == [op for tick in ticks for op in tick]


@pytest.mark.parametrize("precision", ["bf16", "mxfp8"])
def test_staged_equals_its_stages_run_one_after_the_other(precision: str) -> None:
    shape, tokens = Shape(T=48, D=64, E=4, K=2), 48
    spec = CaseSpec("training", 1, precision, "staged", "t", 64, 1.0)
    plan = build_plan(shape, spec, seed=2)
    device = torch.device("cpu")
    ctx = BuildContext(plan, 0, tokens, precision, None, device, False)
    staged = build_staged(ctx)
    cfg = PassConfig(precision, precision != "bf16", True, experts_loop, None)
    bounds = [tokens * s // 4 for s in range(5)]
    routings = [prepare(rank_routing(plan, 0, range(a, b)), device, torch.bfloat16, True)
                for a, b in zip(bounds, bounds[1:], strict=False)]

    def run(forward_fn: str) -> tuple[torch.Tensor, list[torch.Tensor]]:
        experts = make_experts(64, 64, 0, 4, 2, torch.bfloat16, device)
        for p in experts.parameters():
            p.requires_grad_(True)
        x = torch.randn(tokens, 64, generator=torch.Generator().manual_seed(1)).bfloat16()
        x.requires_grad_(True)
        if forward_fn == "staged":
            y = staged(x, experts)
        else:
            y = torch.zeros_like(x)
            for routing in routings:
                routed_pass(x, routing, experts, cfg, y)
        y.float().square().sum().backward()
        grads = [t.grad for t in (x, *experts.parameters())]
        assert all(g is not None for g in grads)
        return y.detach(), [g for g in grads if g is not None]

    (y1, g1), (y2, g2) = run("staged"), run("sequential")
    assert y1.abs().sum() > 0
    assert torch.equal(y1, y2)
    assert all(torch.equal(a, b) for a, b in zip(g1, g2, strict=True))
