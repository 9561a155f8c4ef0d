"""When a case's memory peaks are taken, on two gloo ranks: a stats stub in place of the
CUDA allocator's counters records the order: reset before the case, read after the
layer's timed windows, and only then the reference check, in float32 (a float64 one held
4x the bf16 weights and counted in the peaks)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from gloo_ranks import GlooRanks

from runner import execute
from runner.matrix import parse_matrix
from runner.platform import detect
from runner.routing import build_plan

MATRIX = {"shape": {"T": 16, "D": 64, "E": 4, "K": 2},
          "timing": {"windows": 2, "iterations": 1, "warmup": 0, "warmup_ms": 0},
          "matrix": {"mode": ["inference", "training"], "ep": 2, "precision": "mxfp8",
                     "pipeline": "standard", "F": 64, "imbalance": 1, "category": "c"}}


class StatsStub:
    """Records the calls; gives peaks the outcome must carry."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def reset(self) -> None:
        self.events.append("reset")

    def read(self, harness_bytes: int) -> tuple[float | None, float | None]:
        self.events.append("read")
        return 1.5, 2.5

    def retries(self) -> int:
        return 0


def _rank(rank: int, out: Path) -> None:
    events: list[str] = []
    timed, reference = execute.time_windows, execute.build_reference

    def recorded_timing(*args: Any, **kwargs: Any) -> Any:
        events.append("timed")
        return timed(*args, **kwargs)

    def recorded_reference(ctx: Any) -> Any:
        events.append(f"reference {ctx.dtype}")
        return reference(ctx)

    execute.time_windows = recorded_timing  # type: ignore[assignment]
    execute.build_reference = recorded_reference  # type: ignore[assignment]
    try:
        matrix = parse_matrix(MATRIX)
        results: dict[str, Any] = {}
        for spec in matrix.cases:
            events.clear()
            outcome = execute.run_case(spec, matrix.shape, build_plan(matrix.shape, spec, 0),
                                       matrix.timing, 0, detect(0), rank, dist.group.WORLD,
                                       memory=StatsStub(events))
            results[spec.mode] = {"events": list(events),
                                  "peaks": [outcome.allocated_peak_gib,
                                            outcome.reserved_peak_gib],
                                  "error": outcome.numerical_error}
        (out / f"rank{rank}.json").write_text(json.dumps(results))
    finally:  # the rank goes on to other tests' tasks (tests/gloo_ranks.py)
        execute.time_windows, execute.build_reference = timed, reference


def test_peaks_are_read_after_timing_and_before_the_float32_reference(
        tmp_path: Path, gloo_pair: GlooRanks) -> None:
    gloo_pair.run(_rank, tmp_path)
    reference = f"reference {torch.float32}"
    for rank in range(2):
        results = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert results["inference"]["events"] == ["reset", "timed", "read", reference]
        # training: combined, forward and backward timed, then the peaks
        assert results["training"]["events"] == [
            "reset", "timed", "timed", "timed", "read", reference]
        for mode in ("inference", "training"):
            assert results[mode]["peaks"] == [1.5, 2.5]
            assert 0 < results[mode]["error"] < execute.ERROR_BOUNDS["mxfp8"]
