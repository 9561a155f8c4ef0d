"""A case names the expert kernel its timed passes ran, on one CPU rank (EP 1, no group):
grouped where the probe passed, the loop where it failed (with the expert_loop caveat once
the service derives it), and never the float32 reference's loop, which runs after the
timings."""

from __future__ import annotations

import pytest
import torch

from ingest.derived import caveats
from ingest.schema import Case, Meta
from runner import execute
from runner.matrix import parse_matrix
from runner.platform import Platform
from runner.report import PlatformFacts, build_case, build_meta
from runner.routing import build_plan

MATRIX = {"shape": {"T": 16, "D": 64, "E": 4, "K": 2},
          "timing": {"windows": 2, "iterations": 2, "warmup": 0, "warmup_ms": 0},
          "matrix": {"mode": ["inference", "training"], "ep": 1, "precision": "bf16",
                     "pipeline": "standard", "F": 64, "imbalance": 1, "category": "c"}}


@pytest.mark.parametrize(("grouped", "kernel"), [(True, "grouped_mm"), (False, "loop")])
def test_a_case_names_the_kernel_its_timed_passes_ran(grouped: bool, kernel: str) -> None:
    matrix = parse_matrix(MATRIX)
    plat = Platform(torch.device("cpu"), "gloo", "CPU", grouped, {},
                    None if grouped else "probe failed (test)")
    facts = PlatformFacts("CPU", False, {"groupedMM": grouped,
                                         "groupedMMReason": plat.grouped_mm_reason},
                          {}, None, None, "none")
    meta = Meta.model_validate(build_meta(matrix, facts, "run", [], [], []))
    for spec in matrix.cases:
        outcome = execute.run_case(spec, matrix.shape, build_plan(matrix.shape, spec, 0),
                                   matrix.timing, 0, plat, 0, None)
        assert outcome.expert_kernel == kernel, spec.mode
        case = Case.model_validate(build_case(spec, matrix, [outcome], facts, 1.0))
        assert case.expertKernel == kernel
        codes = {c.code for c in caveats(meta, case)}
        assert ("expert_loop" in codes) is (not grouped), (spec.mode, codes)
        # 2 windows x 2 iterations, each kind of window
        assert outcome.iterations is not None
        assert all(len(times) == 4 for times in outcome.iterations.values())
        assert case.setupS is not None and case.wallS is not None
        assert 0 < case.setupS < case.wallS
    if not grouped:
        assert "probe failed (test)" in meta.model_extra["expertNote"]  # type: ignore[index]
