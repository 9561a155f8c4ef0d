"""The mega pipeline compiled: the whole layer through torch.compile on two gloo ranks.

``moescope run`` compiles mega on CUDA only (on these 2 cores a cold inductor compile
of one case takes 40-60 s, longer than the whole run test), so this test compiles it
once here: the collectives are traced into the graphs (functional all_to_all_single),
the one graph break is the OOM guard around the experts, and the compiled layer gives
the eager layer's output and gradients. And the fallback when compiling fails.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from live import free_port
from torch.multiprocessing.spawn import spawn

from runner.layer import Experts, grouped_mm_runs, make_experts
from runner.pipelines import BuildContext, Forward, compiled_or_eager, mega_forward
from runner.routing import build_plan
from runner.spec import CaseSpec, Shape

SHAPE = Shape(T=32, D=64, E=4, K=2)
SPEC = CaseSpec("training", 2, "mxfp8", "mega", "t", 64, 1.5)
# Inductor keeps bf16 intermediates in fp32 where eager rounds them, which moves a few
# values across an mxfp8 step; a wrong collective or a lost gradient is off by O(1).
TOLERANCE = 3e-2


def _relative(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double() - want.double()).norm() / want.double().norm())


def _step(forward: Forward, x: torch.Tensor, experts: Experts) -> list[torch.Tensor]:
    xs = x.clone().requires_grad_(True)
    ws = Experts(*(p.clone().requires_grad_(True) for p in experts.parameters()))
    y = forward(xs, ws)
    y.backward(torch.ones_like(y))
    grads = [xs.grad, *(p.grad for p in ws.parameters())]
    assert all(g is not None for g in grads), "a gradient is missing"
    return [y.detach(), *(g for g in grads if g is not None)]


def _rank(rank: int, port: int, out: Path) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        device = torch.device("cpu")
        ctx = BuildContext(build_plan(SHAPE, SPEC, seed=3), rank, SHAPE.T, SPEC.precision,
                           dist.group.WORLD, device, grouped_mm_runs(device))
        el = SHAPE.E // 2
        experts = make_experts(SHAPE.D, SPEC.F, rank * el, el, 3, torch.bfloat16, device)
        x = torch.randn(SHAPE.T, SHAPE.D, generator=torch.Generator().manual_seed(rank))
        x = x.to(torch.bfloat16)
        eager = mega_forward(ctx, compile=False)
        compiled = mega_forward(ctx, compile=True)
        errors = [_relative(got, want) for got, want in
                  zip(_step(compiled, x, experts), _step(eager, x, experts), strict=True)]
        with torch.no_grad():
            errors.append(_relative(compiled(x, experts), eager(x, experts)))
        torch._dynamo.reset()
        explained = torch._dynamo.explain(eager)(x, experts)
        calls = [str(n.target) for g in explained.graphs for n in g.graph.nodes
                 if n.op == "call_function"]
        breaks = [str(b.reason) for b in explained.break_reasons]
        (out / f"rank{rank}.json").write_text(json.dumps(
            [errors, ctx.notes, explained.graph_count, breaks, calls]))
    finally:
        dist.destroy_process_group()


def test_the_compiled_mega_layer_traces_its_collectives_and_matches_eager(
        tmp_path: Path) -> None:
    spawn(_rank, args=(free_port(), tmp_path), nprocs=2, join=True)
    for rank in range(2):
        errors, notes, graphs, breaks, calls = json.loads(
            (tmp_path / f"rank{rank}.json").read_text())
        assert notes == []  # compiled, no eager fallback
        assert max(errors) < TOLERANCE, errors  # output, 4 gradients, inference output
        assert graphs == 2 and len(breaks) == 1, breaks
        assert "guarded_experts" in breaks[0]
        dispatch_and_combine = [c for c in calls if "all_to_all_single" in c]
        assert len(dispatch_and_combine) == 2, calls


def test_a_compile_failure_runs_eagerly_and_says_so(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def failing_compile(fn: Callable[..., torch.Tensor], **_: object
                        ) -> Callable[..., torch.Tensor]:
        def run(*args: object) -> torch.Tensor:
            raise RuntimeError("no working C++ compiler")
        return run

    monkeypatch.setattr(torch, "compile", failing_compile)
    notes: list[str] = []
    double = compiled_or_eager(lambda t: t * 2, notes)
    assert torch.equal(double(torch.ones(3)), torch.full((3,), 2.0))
    assert notes == ["mega: torch.compile failed (RuntimeError: no working C++ compiler); "
                     "the layer ran eagerly"]
    assert "warning: mega: torch.compile failed" in capsys.readouterr().err
    assert torch.equal(double(torch.ones(1)), torch.full((1,), 2.0))
    assert len(notes) == 1  # once: it stays eager


def test_running_out_of_memory_is_not_a_compile_failure(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    def oom_compile(fn: Callable[..., torch.Tensor], **_: object
                    ) -> Callable[..., torch.Tensor]:
        def run(*args: object) -> torch.Tensor:
            raise torch.OutOfMemoryError("out of memory")
        return run

    monkeypatch.setattr(torch, "compile", oom_compile)
    notes: list[str] = []
    with pytest.raises(torch.OutOfMemoryError):
        compiled_or_eager(lambda t: t * 2, notes)(torch.ones(3))
    assert notes == []


def test_a_failure_during_graph_capture_is_not_a_compile_failure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def capture_breaking_compile(fn: Callable[..., torch.Tensor], **_: object
                                 ) -> Callable[..., torch.Tensor]:
        def run(*args: object) -> torch.Tensor:
            calls.append("compiled")
            raise RuntimeError("operation not permitted when stream is capturing")
        return run

    monkeypatch.setattr(torch, "compile", capture_breaking_compile)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    notes: list[str] = []
    layer = compiled_or_eager(lambda t: t * 2, notes)
    with pytest.raises(RuntimeError, match="capturing"):
        layer(torch.ones(3))
    assert notes == []
    with pytest.raises(RuntimeError, match="capturing"):
        layer(torch.ones(3))
    assert calls == ["compiled", "compiled"]  # still the compiled layer, not switched
