"""The CUDA-graph decision on two gloo ranks: a capture that fails on one rank only sends
every rank to eager timing (the graphs hold the collectives, so a split decision would
leave ranks waiting in different collectives). The captures themselves need a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.distributed as dist
from gloo_ranks import GlooRanks

from runner import oom
from runner.experts import Experts, make_experts
from runner.graphs import NO_GRAPHS, agree_on_capture, training_steps
from runner.oom import STATE as OOM


def _capture(rank: int, failing: str) -> str:
    if failing == f"rank{rank}":
        raise RuntimeError("operation not permitted when stream is capturing")
    if failing == f"oom{rank}":
        raise torch.OutOfMemoryError("CUDA out of memory")
    return f"graph of rank {rank}"


def _rank(rank: int, out: Path) -> None:
    results = {}
    for failing in ("none", "rank1", "oom0"):
        OOM.hit = False
        result, note = agree_on_capture(lambda f=failing: _capture(rank, f),
                                        dist.group.WORLD, torch.device("cpu"))
        results[failing] = [result, note, OOM.hit]
    OOM.hit = False  # the rank goes on to other tests' tasks (tests/gloo_ranks.py)
    (out / f"rank{rank}.json").write_text(json.dumps(results))


def test_a_capture_failing_on_one_rank_sends_every_rank_to_eager(
        tmp_path: Path, gloo_pair: GlooRanks) -> None:
    gloo_pair.run(_rank, tmp_path)
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2))
    assert r0["none"] == ["graph of rank 0", None, False]
    assert r1["none"] == ["graph of rank 1", None, False]
    assert r1["rank1"][:2] == [None, "CUDA graph capture failed (RuntimeError: operation "
                                     "not permitted when stream is capturing); timed eagerly"]
    assert r0["rank1"][:2] == [None, "CUDA graph capture failed on another rank; timed eagerly"]
    # Out of memory in a capture: eager on every rank, and flagged for the phase's OOM
    # agreement on the rank that ran out.
    assert r0["oom0"] == [None, "out of memory during CUDA graph capture; timed eagerly", True]
    assert r1["oom0"] == [None, "CUDA graph capture failed on another rank; timed eagerly",
                          False]


def test_training_on_the_cpu_runs_the_eager_steps() -> None:
    device = torch.device("cpu")
    experts = make_experts(32, 32, 0, 2, 1, torch.float32, device)
    for p in experts.parameters():
        p.requires_grad_(True)
    x = torch.randn(8, 32, requires_grad=True)
    grad_out = torch.randn(8, 32)
    calls = []

    def forward(x: torch.Tensor, e: Experts) -> torch.Tensor:
        calls.append(1)
        return (x @ experts.gate[0]) * 2

    steps = training_steps(forward, experts, x, grad_out, False, None)
    assert (steps.accepted, steps.note) == (None, NO_GRAPHS)
    assert steps.backward is not None
    steps.step()
    assert x.grad is not None and experts.gate.grad is not None
    assert torch.allclose(x.grad, grad_out @ experts.gate[0].T * 2)
    steps.forward()  # a fresh forward clears the previous gradients
    assert x.grad is None and len(calls) == 2
    steps.backward()
    assert torch.allclose(x.grad, grad_out @ experts.gate[0].T * 2)


def test_a_failure_during_graph_capture_falls_back_to_eager() -> None:
    """The expert work's failure inside the capture is swallowed by ``oom.guarded`` (zeros
    go on); the capture must not be taken as a success, nor the failure kept for the
    phase: the case is timed eagerly, where a failure that recurs is its own."""
    def failing() -> torch.Tensor:
        raise RuntimeError("operation not permitted when stream is capturing")

    def capture() -> torch.Tensor:
        return oom.guarded(failing, lambda: torch.zeros(2))

    oom.start_phase("combined")
    graph, note = agree_on_capture(capture, None, torch.device("cpu"))
    assert graph is None
    assert note == ("CUDA graph capture failed (RuntimeError: operation not permitted when "
                    "stream is capturing); timed eagerly")
    assert oom.STATE.failure is None and not oom.STATE.hit
    # A failure from before the capture stays the phase's.
    oom.STATE.failure = "RuntimeError: earlier"
    graph, note = agree_on_capture(lambda: torch.ones(1), None, torch.device("cpu"))
    assert graph is not None and note is None and oom.STATE.failure == "RuntimeError: earlier"
    oom.start_phase("")
