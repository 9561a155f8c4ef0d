"""``ep1_group = true``: an EP 1 case runs its collectives in a one-rank process group
(what the GPU check needs to exercise NCCL on one GPU) instead of skipping them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch.distributed as dist
from live import free_port
from torch.multiprocessing.spawn import spawn

from runner.execute import run_case
from runner.launch import _groups
from runner.matrix import MatrixError, parse_matrix
from runner.platform import detect
from runner.routing import build_plan

MATRIX = {"shape": {"T": 16, "D": 32, "E": 4, "K": 2},
          "timing": {"windows": 1, "iterations": 1, "warmup": 0, "warmup_ms": 0},
          "matrix": {"mode": "inference", "ep": 1, "precision": "bf16",
                     "pipeline": ["standard", "mega"], "F": 32, "imbalance": 1,
                     "category": "c"}}


def _rank(rank: int, port: int, out: Path) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    calls = {"all_to_all_single": 0}
    original = dist.all_to_all_single

    def counted(*args: object, **kwargs: object) -> object:
        calls["all_to_all_single"] += 1
        return original(*args, **kwargs)  # type: ignore[arg-type]

    dist.all_to_all_single = counted  # type: ignore[assignment]
    try:
        results = {}
        plat = detect(0)
        for ep1_group in (False, True):
            matrix = parse_matrix({**MATRIX, "ep1_group": ep1_group})
            group = _groups(1, {1}, matrix.ep1_group)[1]
            spec = matrix.cases[0]  # standard: the in-place all_to_all_single
            calls["all_to_all_single"] = 0
            outcome = run_case(spec, matrix.shape, build_plan(matrix.shape, spec, 0),
                               matrix.timing, 0, plat, 0, group)
            results[str(ep1_group)] = [group is not None, calls["all_to_all_single"],
                                       outcome.phase_windows is not None]
        (out / "result.json").write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


def test_ep1_group_runs_the_collectives(tmp_path: Path) -> None:
    spawn(_rank, args=(free_port(), tmp_path), nprocs=1, join=True)
    results = json.loads((tmp_path / "result.json").read_text())
    assert results["False"] == [False, 0, True]  # EP 1 alone: nothing leaves the rank
    group, calls, phases = results["True"]
    assert group and phases and calls > 0


def test_ep1_group_must_be_a_boolean() -> None:
    with pytest.raises(MatrixError, match="^ep1_group: must be true or false, got 'yes'$"):
        parse_matrix({**MATRIX, "ep1_group": "yes"})
