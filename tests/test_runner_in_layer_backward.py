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
from pathlib import Path

from injection import env_with_injection
from live import REPO
from runner_helpers import one_case_matrix, run_args

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
