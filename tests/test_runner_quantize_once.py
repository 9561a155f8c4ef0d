"""Quantized times measure the layer, not the quantization of its weights: the expert
weights are quantized once when the layer is built, so a timed step quantizes only its
activations, and rows a quantized dispatch delivered on the grid are not quantized again
(the native GEMM takes them with the wire's scales).
The quantizers are wrapped here and every call inside the timed windows is recorded by
the shape of what it quantized."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from gloo_ranks import GlooRanks

from runner import execute, native, quant
from runner.expert_kernels import experts_loop, experts_native
from runner.experts import make_experts, quantize_experts
from runner.layer import DeviceRouting, PassConfig, dispatch_wire
from runner.matrix import parse_matrix
from runner.platform import detect
from runner.quant import wire_parts
from runner.routing import build_plan

D, F, E = 64, 96, 4
# Weights as the quantizers see them (blocks along the reduction dimension): the stacked
# [E, out, in] tensors, or one expert's [out, in]. No activation has these shapes here:
# rows are [16, D] and [16, F] (standard) or multiples of 128 rows (padded groups).
WEIGHT_SHAPES = {(E, F, D), (E, D, F), (F, D), (D, F)}
MATRIX = {"shape": {"T": 8, "D": D, "E": E, "K": 2},
          "timing": {"windows": 2, "iterations": 2, "warmup": 1, "warmup_ms": 0},
          "matrix": {"mode": ["inference", "training"], "ep": 1,
                     "precision": ["mxfp8", "nvfp4"], "pipeline": ["standard", "staged", "mega"],
                     "F": F, "imbalance": 1, "category": "c"}}


@contextmanager
def recorded_quantizers(monkeypatch: pytest.MonkeyPatch, active: Callable[[], bool]
                        ) -> Iterator[list[tuple[int, ...]]]:
    """The input shape of every quantize call while ``active()``."""
    shapes: list[tuple[int, ...]] = []
    originals = {name: getattr(quant, name) for name in ("quantize_mxfp8", "quantize_nvfp4")}
    for module in (quant, native):
        for name, original in originals.items():

            def wrapper(x: torch.Tensor, *args: Any, _original: Any = original) -> Any:
                if active():
                    shapes.append(tuple(x.shape))
                return _original(x, *args)

            monkeypatch.setattr(module, name, wrapper)
    yield shapes


@pytest.fixture
def timing(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A flag, set while ``execute.time_windows`` (the timed windows) runs."""
    flag = [False]
    timed = execute.time_windows

    def timed_and_flagged(*args: Any, **kwargs: Any) -> Any:
        flag[0] = True
        try:
            return timed(*args, **kwargs)
        finally:
            flag[0] = False

    monkeypatch.setattr(execute, "time_windows", timed_and_flagged)
    return flag


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_no_weight_is_quantized_inside_a_timed_step(monkeypatch: pytest.MonkeyPatch,
                                                    timing: list[bool], mode: str) -> None:
    matrix = parse_matrix(MATRIX)
    plat = detect(0)
    with recorded_quantizers(monkeypatch, lambda: timing[0]) as shapes:
        for spec in (s for s in matrix.cases if s.mode == mode):
            shapes.clear()
            outcome = execute.run_case(spec, matrix.shape, build_plan(matrix.shape, spec, 0),
                                       matrix.timing, 0, plat, 0, None)
            assert outcome.combined is not None and outcome.failure is None, spec.id
            assert outcome.numerical_error is not None
            assert outcome.numerical_error < execute.ERROR_BOUNDS[spec.precision], spec.id
            assert shapes, spec.id  # the activations are quantized in the step
            assert not WEIGHT_SHAPES & set(shapes), (spec.id, shapes)
            if spec.pipeline != "standard":
                # The quantized dispatch delivers the rows on the grid: only the sent rows
                # (a stage's 4 or the layer's 16) are quantized, never the received ones
                # again (padded to 128-row groups).
                assert not [s for s in shapes if s[-1] == D and s[0] >= 128], (spec.id, shapes)


@pytest.fixture
def cpu_scaled_mm(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch._scaled_mm`` on the CPU: the product of the decoded operands (the layout
    itself is checked in test_runner_native.py)."""
    from test_runner_native import cublas_semantics

    monkeypatch.setattr(torch, "_scaled_mm",
                        lambda a, b, sa, sb, out_dtype, **_: cublas_semantics(a, b, sa, sb,
                                                                                out_dtype))


@pytest.mark.parametrize("precision", ["mxfp8", "nvfp4"])
def test_native_experts_quantize_only_the_rows_and_the_hidden_activation(
        monkeypatch: pytest.MonkeyPatch, cpu_scaled_mm: None, precision: str) -> None:
    experts = quantize_experts(make_experts(D, F, 0, E, 1, torch.bfloat16,
                                            torch.device("cpu")), precision, native=True)
    rows = torch.randn(40, D, generator=torch.Generator().manual_seed(5)).bfloat16()
    counts, offs = [25, 0, 15, 0], torch.tensor([25, 25, 40, 40], dtype=torch.int32)
    with recorded_quantizers(monkeypatch, lambda: True) as shapes, torch.no_grad():
        got = experts_native(experts_loop)(rows, experts, counts, offs, precision)
    assert shapes == [(40, D), (40, F)]  # once each, over all experts' rows
    want = experts_loop(rows, experts, counts, offs, precision)
    # The two paths round the hidden activation to bf16 at different points (the CPU
    # stand-in decodes in float32); e2m1's steps are coarse enough that a bf16 ulp moves
    # some elements to the next grid point, e4m3's mostly not.
    bound = {"mxfp8": 2e-2, "nvfp4": 1e-1}[precision]
    assert ((got.float() - want.float()).norm() / want.float().norm()) < bound
    # The weights made at build time are the ones quantizing on the fly would give.
    unprepared = make_experts(D, F, 0, E, 1, torch.bfloat16, torch.device("cpu"))
    assert torch.equal(experts_loop(rows, unprepared, counts, offs, precision), want)


@pytest.mark.parametrize("precision", ["mxfp8", "nvfp4"])
def test_a_timed_native_step_takes_the_received_rows_as_the_wire_delivered_them(
        monkeypatch: pytest.MonkeyPatch, cpu_scaled_mm: None, timing: list[bool],
        precision: str) -> None:
    matrix = parse_matrix(MATRIX)
    plat = replace(detect(0), native_scaled={precision: True})
    spec = next(s for s in matrix.cases if s.mode == "inference"
                and s.pipeline == "staged" and s.precision == precision)
    with recorded_quantizers(monkeypatch, lambda: timing[0]) as shapes:
        outcome = execute.run_case(spec, matrix.shape, build_plan(matrix.shape, spec, 0),
                                   matrix.timing, 0, plat, 0, None)
    assert outcome.combined is not None and outcome.failure is None
    assert outcome.emulated is False  # every expert call in the case ran the native path
    assert outcome.numerical_error is not None
    assert outcome.numerical_error < execute.ERROR_BOUNDS[precision]
    # Every stage quantizes the rows it sends (4 stages x 2 tokens x top-2: 4 rows each)
    # and its hidden activation (padded to 128-row groups), never the received rows (D
    # wide, padded to 128-row groups).
    sent = [s for s in shapes if s == (4, D)]
    hidden = [s for s in shapes if s[-1] == F and s[0] >= 128]
    received = [s for s in shapes if s[-1] == D and s[0] >= 128]
    assert sent and len(sent) == len(hidden), shapes
    assert not received, shapes


def _dispatch_rank(rank: int, out: Path) -> None:
    # 4 rows a rank, 2 to each rank; rank 1's rows 10x larger
    r = DeviceRouting(token=torch.arange(4), weight=torch.ones(4), order=torch.arange(4),
                      send_splits=[2, 2], recv_splits=[2, 2], counts=[4],
                      offs=torch.tensor([4], dtype=torch.int32), pad=None)
    scales = []
    for traceable in (False, True):
        cfg = PassConfig("nvfp4", True, False, experts_loop, dist.group.WORLD,
                         traceable=traceable, wire_to_gemm=True)
        with torch.no_grad():
            _, wire = dispatch_wire(_rows(rank), r, cfg)
        assert wire is not None
        scales.append(wire_parts(wire, "nvfp4", D)[2].flatten().tolist())
    (out / f"rank{rank}.json").write_text(json.dumps(scales))


def _rows(rank: int) -> torch.Tensor:
    x = torch.randn(4, D, generator=torch.Generator().manual_seed(rank)) * (1 + 9 * rank)
    return x.bfloat16()


def test_an_nvfp4_dispatch_agrees_one_tensor_scale_over_the_group(
        tmp_path: Path, gloo_pair: GlooRanks) -> None:
    """Rows from both senders reach each rank under one tensor scale, the recipe's for
    the larger amax, so a native GEMM can take them as one operand."""
    gloo_pair.run(_dispatch_rank, tmp_path)
    amax = max(_rows(rank).float().abs().max().item() for rank in range(2))
    want = amax / (6 * 448)
    for rank in range(2):
        for received in json.loads((tmp_path / f"rank{rank}.json").read_text()):
            assert received == pytest.approx([want] * 4, rel=1e-6), (rank, received)
