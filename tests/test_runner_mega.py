"""The mega pipeline compiled: the whole layer through torch.compile on two gloo ranks.

``moescope run`` compiles mega on CUDA only (on these 2 cores a cold inductor compile
of one case takes 40-60 s, longer than the whole run test), so this test compiles it
here: the collectives are traced into the graphs (functional all_to_all_single), the one
graph break is the OOM guard around the experts, the compiled layer gives the eager
layer's output and gradients, and a second case of the same shape with another imbalance
reuses the compiled layer (no graph compiled, counted by dynamo's own counters), also in
a whole ``moescope run`` (compileS, compiledGraphs). And the fallbacks to eager when
compiling fails or dynamo reaches its recompile limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.fx.experimental._config as fx_config
from gloo_ranks import GlooRanks
from live import REPO

from runner.compiles import COMPILES, compiled_or_eager, strict_recompiles
from runner.experts import Experts, make_experts
from runner.grouped_probe import grouped_mm_runs
from runner.pipelines import MEGA, BuildContext, Forward, mega_forward
from runner.routing import build_plan
from runner.spec import CaseSpec, Shape

SHAPE = Shape(T=32, D=64, E=4, K=2)
SPEC = CaseSpec("training", 2, "mxfp8", "mega", "t", 64, 1.5)
BALANCED = CaseSpec("training", 2, "mxfp8", "mega", "t", 64, 1.0)  # the same shape
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


def _errors(ctx: BuildContext, x: torch.Tensor, experts: Experts) -> list[float]:
    """The compiled layer against the eager one: output and 4 gradients, inference output."""
    eager = mega_forward(ctx, compile=False)
    compiled = mega_forward(ctx, compile=True)
    errors = [_relative(got, want) for got, want in
              zip(_step(compiled, x, experts), _step(eager, x, experts), strict=True)]
    with torch.no_grad():
        errors.append(_relative(compiled(x, experts), eager(x, experts)))
    return errors


def _rank(rank: int, out: Path) -> None:
    made_before = MEGA.made  # the rank may have run other tests' tasks (tests/gloo_ranks.py)
    try:
        device = torch.device("cpu")

        def context(spec: CaseSpec) -> BuildContext:
            return BuildContext(build_plan(SHAPE, spec, seed=3), rank, SHAPE.T,
                                spec.precision, dist.group.WORLD, device,
                                grouped_mm_runs(device), widths=(SHAPE.D, spec.F))

        el = SHAPE.E // 2
        experts = make_experts(SHAPE.D, SPEC.F, rank * el, el, 3, torch.bfloat16, device)
        x = torch.randn(SHAPE.T, SHAPE.D, generator=torch.Generator().manual_seed(rank))
        x = x.to(torch.bfloat16)
        cases = []
        for spec in (SPEC, BALANCED):
            ctx = context(spec)
            COMPILES.start()
            errors = _errors(ctx, x, experts)
            graphs, seconds = COMPILES.read()
            cases.append([errors, ctx.notes, graphs, seconds,
                          ctx.plan.receive[rank]])
        torch._dynamo.reset()
        explained = torch._dynamo.explain(mega_forward(context(SPEC), compile=False))(
            x, experts)
        calls = [str(n.target) for g in explained.graphs for n in g.graph.nodes
                 if n.op == "call_function"]
        breaks = [str(b.reason) for b in explained.break_reasons]
        (out / f"rank{rank}.json").write_text(json.dumps(
            [cases, MEGA.made - made_before, explained.graph_count, breaks, calls]))
    finally:  # no compiled code left behind for the rank's next task
        torch._dynamo.reset()


def test_the_compiled_mega_layer_traces_its_collectives_and_matches_eager(
        tmp_path: Path, gloo_pair: GlooRanks) -> None:
    gloo_pair.run(_rank, tmp_path)
    for rank in range(2):
        cases, made, graphs, breaks, calls = json.loads(
            (tmp_path / f"rank{rank}.json").read_text())
        (errors, notes, compiled, seconds, rows), (errors2, notes2, compiled2, seconds2,
                                                   rows2) = cases
        assert notes == [] and notes2 == []  # compiled, no eager fallback
        assert max(errors) < TOLERANCE, errors  # output, 4 gradients, inference output
        assert max(errors2) < TOLERANCE, errors2
        # The first case compiled the layer (its two graphs around the break, the
        # experts; for training and for inference); the second, another imbalance (this
        # rank receives another number of rows), compiled nothing.
        assert rows != rows2
        assert compiled >= 3 and seconds > 0, (compiled, seconds)
        assert compiled2 == 0 and seconds2 == 0, (compiled2, seconds2)
        assert made == 1
        assert graphs == 2 and len(breaks) == 1, breaks
        assert "guarded_experts" in breaks[0]
        dispatch_and_combine = [c for c in calls if "all_to_all_single" in c]
        assert len(dispatch_and_combine) == 2, calls


# Inductor's first import in this process (the run compiles in its own processes).
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_reaching_the_recompile_limit_runs_eagerly_and_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch._dynamo.config, "fail_on_recompile_limit_hit", False)
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 1)
    monkeypatch.setattr(fx_config, "use_duck_shape", True)
    strict_recompiles()
    torch._dynamo.reset()
    notes: list[str] = []
    double = compiled_or_eager(lambda t: t * 2, notes.append)  # static shapes
    assert torch.equal(double(torch.ones(3)), torch.full((3,), 2.0))
    assert notes == []
    # Another size needs a second graph, past the limit of one.
    assert torch.equal(double(torch.ones(5)), torch.full((5,), 2.0))
    assert notes == ["mega: torch.compile reached dynamo's recompile limit "
                     "(FailOnRecompileLimitHit: recompile_limit 1); the layer ran eagerly"]
    assert torch.equal(double(torch.ones(7)), torch.full((7,), 2.0))  # eager from now on
    assert len(notes) == 1
    torch._dynamo.reset()


def test_a_compile_failure_runs_eagerly_and_says_so(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def failing_compile(fn: Callable[..., torch.Tensor], **_: object
                        ) -> Callable[..., torch.Tensor]:
        def run(*args: object) -> torch.Tensor:
            raise RuntimeError("no working C++ compiler")
        return run

    monkeypatch.setattr(torch, "compile", failing_compile)
    notes: list[str] = []
    double = compiled_or_eager(lambda t: t * 2, notes.append)
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
        compiled_or_eager(lambda t: t * 2, notes.append)(torch.ones(3))
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
    layer = compiled_or_eager(lambda t: t * 2, notes.append)
    with pytest.raises(RuntimeError, match="capturing"):
        layer(torch.ones(3))
    assert notes == []
    with pytest.raises(RuntimeError, match="capturing"):
        layer(torch.ones(3))
    assert calls == ["compiled", "compiled"]  # still the compiled layer, not switched


RUN_MATRIX = """seed = 3
[shape]
T = 32
D = 64
E = 4
K = 2
[matrix]
mode = "inference"
ep = 2
precision = "mxfp8"
pipeline = "mega"
F = 64
imbalance = [1, 1.5]
category = "c"
[timing]
windows = 2
iterations = 2
warmup = 1
warmup_ms = 0
"""


def test_a_run_compiles_mega_once_per_shape_and_reports_the_compile_time(
        tmp_path: Path) -> None:
    """``moescope run`` on two gloo ranks with mega compiled on the CPU
    (MOESCOPE_COMPILE_ON_CPU): the first case of the shape compiles (compileS, its graphs),
    the second, another imbalance, reuses the layer: no graph, no compile time."""
    matrix, out = tmp_path / "matrix.toml", tmp_path / "report.json"
    matrix.write_text(RUN_MATRIX)
    result = subprocess.run(
        [sys.executable, "-m", "cli", "run", "--matrix", str(matrix), "--nproc", "2",
         "--out", str(out), "--spool", str(tmp_path / "spool")],
        capture_output=True, text=True, cwd=REPO, timeout=600,
        env={**os.environ, "MOESCOPE_URL": "", "MOESCOPE_COMPILE_ON_CPU": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = json.loads(out.read_text())["cases"]
    assert (first["imbalance"], second["imbalance"]) == (1.0, 1.5)
    assert first["receiveRows"] != second["receiveRows"]
    assert first["compiledGraphs"] >= 3 and first["compileS"] > 0
    assert first["compileS"] < first["setupS"]  # compiled in the first warm-up
    assert second["compiledGraphs"] == 0 and second["compileS"] == 0
    for case in (first, second):
        assert case["numericalAccepted"] is True, case["numericalRelativeError"]
        assert "torch.compile" not in (case.get("graphNote") or ""), case["graphNote"]
