"""The experts' weights kept across the cases of one shape (runner.weights): drawn once
per shape (``make_experts`` calls counted), handed back without the gradients a training
case left on them, and a case's numbers after another case the same as alone."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from runner import execute, weights
from runner.matrix import parse_matrix
from runner.platform import detect
from runner.report import RankOutcome
from runner.routing import build_plan
from runner.spec import CaseSpec
from runner.weights import WeightCache

MATRIX = {"shape": {"T": 8, "D": 64, "E": 4, "K": 2},
          "timing": {"windows": 2, "iterations": 2, "warmup": 1, "warmup_ms": 0},
          "matrix": {"mode": ["training", "inference"], "ep": 1,
                     "precision": ["bf16", "mxfp8"], "pipeline": "standard",
                     "F": [96, 128], "imbalance": 1, "category": "c"}}


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch) -> WeightCache:
    """A fresh cache for the run, counting the weights drawn."""
    fresh = WeightCache()
    monkeypatch.setattr(execute, "WEIGHTS", fresh)
    return fresh


def _case(mode: str, precision: str, f: int) -> CaseSpec:
    matrix = parse_matrix(MATRIX)
    return next(s for s in matrix.cases
                if (s.mode, s.precision, s.F) == (mode, precision, f))


def _run(spec: CaseSpec) -> RankOutcome:
    matrix = parse_matrix(MATRIX)
    outcome = execute.run_case(spec, matrix.shape, build_plan(matrix.shape, spec, 0),
                               matrix.timing, 0, detect(0), 0, None)
    assert outcome.failure is None and outcome.numerical_error is not None, spec.id
    return outcome


def _numbers(outcome: RankOutcome) -> dict[str, Any]:
    """What a case reports that does not depend on the clock."""
    return {"error": outcome.numerical_error, "kernel": outcome.expert_kernel,
            "rows": outcome.rows_received, "sent": outcome.rows_sent_off_rank}


def test_a_case_after_others_of_its_shape_reuses_their_weights_and_matches_it_alone(
        cache: WeightCache, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _case("training", "mxfp8", 96)
    alone = _numbers(_run(target))
    assert cache.draws == 1

    fresh = WeightCache()
    monkeypatch.setattr(execute, "WEIGHTS", fresh)
    _run(_case("training", "bf16", 96))
    # A training case can leave gradients on the kept weights (its last pass, the in-layer
    # phases' forward, clears them; a backward last would not): leave some there, as large
    # as the weights, so the next cases must not see them.
    assert fresh.drawn is not None
    for p in fresh.drawn.parameters():
        p.grad = torch.ones_like(p)
    _run(_case("inference", "mxfp8", 96))
    after = _numbers(_run(target))
    assert fresh.draws == 1  # three cases of one shape: drawn once
    assert after.pop("error") == pytest.approx(alone.pop("error"), rel=1e-6)
    assert after == alone


def test_another_shape_draws_again_and_drops_the_last(cache: WeightCache) -> None:
    _run(_case("inference", "mxfp8", 96))
    kept = cache.drawn
    _run(_case("inference", "mxfp8", 128))  # another F
    assert cache.draws == 2 and cache.drawn is not kept
    assert cache.drawn is not None and cache.drawn.gate.shape == (4, 64, 128)
    assert list(cache.quantized) == [("mxfp8", False)]


def test_kept_weights_are_the_ones_a_fresh_draw_gives(cache: WeightCache) -> None:
    key = weights.WeightKey(64, 96, 0, 4, 0, torch.bfloat16, torch.device("cpu"))
    first = cache.experts(key, "bf16", False)
    for p in first.parameters():  # as a training case leaves them
        p.requires_grad_(True)
        p.grad = torch.ones_like(p)
    again = cache.experts(key, "mxfp8", False)
    drawn = weights.make_experts(64, 96, 0, 4, 0, torch.bfloat16, torch.device("cpu"))
    assert cache.draws == 1
    for got, want in zip(again.parameters(), drawn.parameters(), strict=True):
        assert torch.equal(got, want) and got.grad is None and not got.requires_grad
    assert again.quantized is not None and again.quantized.precision == "mxfp8"
    assert list(cache.quantized) == [("mxfp8", False)]  # bf16's entry dropped
