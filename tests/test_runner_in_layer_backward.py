"""The backward's phases inside the layer's own training step (``inLayerBackwardPhaseMS``)
on two gloo ranks, against measures taken apart from them: the layer's own backward
window and a known delay injected into one phase.

The experts' backward sleeps DELAY_MS on both ranks (tests/injection.py) in the layer's
backward timing and in the in-layer pass, not in the pass that times each phase alone:
the in-layer experts phase must exceed the experts timed alone by about DELAY_MS, while
dispatch and combine stay well under it; the three phases, nested inside the backward,
sum to no more than the layer's backward (which holds the delay too)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import torch
from injection import env_with_injection
from live import REPO
from runner_helpers import one_case_matrix, run_args

from runner.phase_clock import PhaseClock

DELAY_MS = 40.0
MATRIX = one_case_matrix("training", "slowed", tokens=32, windows=3, iterations=2)


def test_the_backward_phases_inside_the_layer_find_a_slowed_phase(tmp_path: Path) -> None:
    args, out = run_args(tmp_path, MATRIX)
    delay = ";".join(f"rank={rank},phase={phase},pass=backward,ms={DELAY_MS}"
                     for rank in (0, 1) for phase in ("backward", "in-layer phases"))
    result = subprocess.run(
        args, capture_output=True, text=True, cwd=REPO, timeout=120,
        env={**env_with_injection(delay=delay), "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    (case,) = json.loads(out.read_text())["cases"]
    inside, alone = case["inLayerBackwardPhaseMS"], case["backwardPhaseMS"]
    assert set(inside) == {"combine", "experts", "dispatch"}
    assert all(ms > 0 for ms in inside.values()), inside
    total = sum(inside.values())
    assert case["inLayerBackwardPhaseSumMS"] == total
    assert case["inLayerBackwardPhaseGapMS"] == case["backwardMS"] - total
    # Nested inside the backward: their sum is at most the layer's backward (timed in
    # its own windows, hence the margin for the shared CPU's noise).
    assert total <= case["backwardMS"] * 1.1, (inside, case["backwardMS"])
    assert case["backwardMS"] > DELAY_MS  # the delay ran in the layer's backward too
    # The slowed phase grew by about the delay; the others did not take it in.
    grown = inside["experts"] - alone["experts"]
    assert 0.9 * DELAY_MS <= grown <= 1.5 * DELAY_MS, (inside, alone)
    assert inside["dispatch"] < DELAY_MS / 2 and inside["combine"] < DELAY_MS / 2, inside
    assert "backward (each phase from its gradient arriving" in case["inLayerPhaseNote"]


class _SlowBackward(torch.autograd.Function):
    """The identity whose backward sleeps ``ms`` first."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, ms: float) -> torch.Tensor:
        ctx.ms = ms
        return x * 1.0

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        time.sleep(ctx.ms / 1e3)
        return grad, None


def _slow(x: torch.Tensor, ms: float) -> torch.Tensor:
    out: torch.Tensor = _SlowBackward.apply(x, ms)  # type: ignore[no-untyped-call]
    return out


def test_a_backward_span_holds_its_phase_and_nothing_after_or_before_it() -> None:
    """In one process: autograd work before the phase's backward (10 ms), inside it
    (30 ms) and after it (20 ms); the span counts only the 30 ms."""
    clock, key = PhaseClock(), object()
    clock.start(torch.device("cpu"))
    x = torch.ones(4, requires_grad=True)
    inside = clock.into("experts", key, _slow(x, 20.0))  # runs after the phase
    y = _slow(inside, 30.0)
    clock.out_of("experts", key, y)
    _slow(y, 10.0).sum().backward()  # runs before the phase
    ms = clock.read_ms()
    assert set(ms) == {("backward", "experts")}
    assert 30.0 <= ms[("backward", "experts")] < 40.0, ms
    # Without gradients nothing is marked.
    with torch.no_grad():
        assert clock.into("experts", key, x) is x
