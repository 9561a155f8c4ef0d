"""A rank that receives no rows, and an expert that receives none: a two-rank gloo run with
imbalance equal to EP (every routed row to rank 0, as in the seed's imbalance-8 cases at
EP 8) in every pipeline and precision, both modes, runs every case and posts it. Before,
nvfp4 took ``amax()`` of rank 1's empty input and the whole run exited non-zero."""

from __future__ import annotations

from pathlib import Path

import pytest
from live import ServerProcess
from runner_helpers import run_posted

from ingest.validate import validate_report
from runner.pipelines import STAGES
from runner.routing import build_plan, rank_routing
from runner.spec import CaseSpec, Shape

pytestmark = pytest.mark.live

SHAPE = Shape(T=8, D=64, E=16, K=2)
MODES, PRECISIONS, PIPELINES = ("inference", "training"), ("bf16", "mxfp8", "nvfp4"), (
    "standard", "staged", "mega")
ALL_TO_RANK0 = [CaseSpec(m, 2, p, pipe, "zero", 64, 2.0)
                for m in MODES for p in PRECISIONS for pipe in PIPELINES]
# Uniform routing, but the staged pipeline's stages of 2 tokens send rank 0 only 4 rows
# for its 8 experts: some experts get none.
EMPTY_EXPERT = [CaseSpec(m, 2, "nvfp4", "staged", "zero", 64, 1.0) for m in MODES]


def matrix_text(cases: list[CaseSpec]) -> str:
    lines = ["seed = 2", "[shape]", f"T = {SHAPE.T}", f"D = {SHAPE.D}", f"E = {SHAPE.E}",
             f"K = {SHAPE.K}", "[timing]", "windows = 1", "iterations = 1", "warmup = 1",
             "warmup_ms = 0"]
    for c in cases:
        lines += ["[[case]]", f'mode = "{c.mode}"', f"ep = {c.ep}", f'precision = "{c.precision}"',
                  f'pipeline = "{c.pipeline}"', f"F = {c.F}", f"imbalance = {c.imbalance}",
                  f'category = "{c.category}"']
    return "\n".join(lines) + "\n"


def test_the_cases_cover_an_empty_rank_and_an_empty_expert() -> None:
    plan = build_plan(SHAPE, ALL_TO_RANK0[0], seed=2)
    assert plan.receive == [2 * SHAPE.T * SHAPE.K, 0]
    uniform = build_plan(SHAPE, EMPTY_EXPERT[0], seed=2)
    first_stage = rank_routing(uniform, 0, range(0, SHAPE.T // STAGES))
    assert 0 in first_stage.expert_counts


def test_zero_received_rows_run_and_post_every_case(
        tmp_path: Path, runner_server: tuple[ServerProcess, str]) -> None:
    cases = [*ALL_TO_RANK0, *EMPTY_EXPERT]
    served = run_posted(runner_server, tmp_path, matrix_text(cases)).served
    validate_report(served)
    assert [c["id"] for c in served["cases"]] == [c.id for c in cases]
    for case in served["cases"]:
        assert case["numericalAccepted"] is True, case["id"]
        assert case["ooms"] == 0 and case["layerMS"] > 0
    for case in served["cases"][:len(ALL_TO_RANK0)]:
        assert case["receiveRows"] == [2 * SHAPE.T * SHAPE.K, 0]
