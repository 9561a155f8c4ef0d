"""fp8 (e4m3, fp32 scales): the quantizers against scales and roundings worked out by hand,
the wire row, the start-up probe on the CPU, the model's bytes, and one ``moescope run``
of fp8 cases on two gloo ranks whose report the service ingests and derives."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import torch
from live import ServerProcess
from runner_helpers import run_posted
from scaled_mm_cpu import blockwise_mm, grouped_mm

from ingest.derived import derive
from ingest.precisions import ACTIVATION_BYTES, ELEMENT_BYTES
from ingest.schema import Case
from ingest.validate import validate_report
from runner import native
from runner.fp8 import (
    dequantize_fp8_rows,
    dequantize_fp8_tiles,
    quantize_fp8_rows,
    quantize_fp8_rowwise,
    quantize_fp8_tiles,
)
from runner.fp8_probe import first_native, probe_fp8, try_candidate
from runner.model import capacity_rows, runner_scratch_bytes
from runner.platform import datasheet_peaks
from runner.quant import fake_quantize, fake_quantize_weight, pack_rows, unpack_rows, wire_width
from runner.spec import CaseSpec, Shape


def _row() -> tuple[torch.Tensor, list[float]]:
    """One row of two 128-blocks and what each element dequantizes to, by hand.
    Block 0: amax 56 -> scale 56/448 = 1/8; 300/8 = 37.5 lies between e4m3's 288 and 320
    (step 32 above 256) and rounds to 288 -> 36; 0.1 * 8 = 0.8 lies between 0.75 and 0.8125
    (step 1/16 in [0.5, 1)), nearer 0.8125 -> 0.1015625. Block 1: all zeros, scale 1."""
    row = torch.zeros(256)
    row[:4] = torch.tensor([56.0, 37.5, -0.125, 0.1])
    want = [56.0, 36.0, -0.125, 0.8125 / 8] + [0.0] * 252
    return row, want


def test_row_scales_and_rounding_by_hand() -> None:
    row, want = _row()
    data, scales = quantize_fp8_rows(row[None])
    assert scales.tolist() == [[56 / 448, 1.0]]
    assert data.dtype == torch.uint8 and data.shape == (1, 256)
    assert dequantize_fp8_rows(data, scales, torch.float32)[0].tolist() == want
    assert fake_quantize(row[None], "fp8")[0].tolist() == pytest.approx(want, abs=0)


def test_weight_tiles_by_hand() -> None:
    """A 256 x 128 weight: two 128x128 tiles, each its own scale = tile amax / 448."""
    w = torch.zeros(256, 128)
    w[0, 0], w[5, 100] = 0.875, 0.3  # tile 0: amax 0.875 -> scale 1/512
    w[200, 7] = -7.0  # tile 1: scale 7/448 = 1/64
    w[255, 127] = 0.05  # 0.05 * 64 = 3.2: e4m3 steps of 1/4 in [2, 4): 3.25 -> 0.05078125
    data, scales = quantize_fp8_tiles(w)
    assert scales.tolist() == [[1 / 512], [1 / 64]]
    got = dequantize_fp8_tiles(data, scales, torch.float32)
    # 0.3 * 512 = 153.6: steps of 16 in [128, 256): 160 -> 160/512
    assert got[0, 0] == 0.875 and got[5, 100] == 160 / 512
    assert got[200, 7] == -7.0 and got[255, 127] == 3.25 / 64
    assert int((got != 0).sum()) == 4
    assert torch.equal(fake_quantize_weight(w, "fp8"), got)


def test_rowwise_one_scale_a_row() -> None:
    x = torch.tensor([[1.0, -448.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    data, scales = quantize_fp8_rowwise(x)
    assert scales.tolist() == [[1.0], [1.0]]  # amax 448 -> 1; a zero row -> 1
    assert data.view(torch.float8_e4m3fn).float().tolist() == x.tolist()


def test_wire_row_is_d_plus_four_bytes_per_128() -> None:
    d = 384
    x = torch.randn(5, d, generator=torch.Generator().manual_seed(1))
    wire = pack_rows(x, "fp8")
    assert wire.dtype == torch.uint8
    assert wire.shape == (5, d + 4 * d // 128) == (5, wire_width("fp8", d))
    assert torch.equal(unpack_rows(wire, "fp8", d, torch.float32), fake_quantize(x, "fp8"))
    assert pack_rows(x[:0], "fp8").shape == (0, 396)
    assert ACTIVATION_BYTES["fp8"] * d == d + Fraction(4 * d, 128)
    assert ELEMENT_BYTES["fp8"] == Fraction(4097, 4096)  # 4 bytes per 128 x 128


def test_model_scratch_counts_the_fp8_wire_row() -> None:
    shape = Shape(T=64, D=256, E=4, K=2)
    fp8 = CaseSpec("inference", 2, "fp8", "staged", "t", 128, 1.0)
    # docs/metrics.md's inference scratch row, 2D + 6F, and the wire row (+4, the runner's
    # tensor-scale allowance)
    per_row = 2 * 256 + 6 * 128 + (256 + 256 * 4 // 128 + 4)
    assert runner_scratch_bytes(shape, fp8, 1) == capacity_rows(shape, fp8, 1) * per_row


def test_probe_on_the_cpu_records_emulation() -> None:
    found = probe_fp8(torch.device("cpu"))
    assert not found.native and found.scaling is None
    assert found.reason is not None and "CUDA" in found.reason
    assert native.FP8.scaling == "blockwise" and not native.FP8.grouped


def test_probe_falls_back_and_records_why(fp8_recipe: Any) -> None:
    """The candidates in order on the CPU, for real: torch's CPU has no blockwise
    ``_scaled_mm`` (ValueError) and no ``_scaled_grouped_mm`` (NotImplementedError), and
    its rowwise ``_scaled_mm`` agrees with the rowwise emulation: that one is chosen, the
    two failures before it recorded."""
    assert try_candidate(torch.device("cpu"), "rowwise", False) is None
    found = first_native(torch.device("cpu"))
    assert (found.scaling, found.grouped) == ("rowwise", False)
    assert (fp8_recipe.scaling, fp8_recipe.grouped) == ("rowwise", False)
    assert found.reason is not None
    blockwise, grouped = found.reason.split("; ")
    assert blockwise.startswith("blockwise torch._scaled_mm: ValueError")
    assert grouped.startswith("rowwise torch._scaled_grouped_mm: NotImplementedError")


def test_hopper_fp8_peak() -> None:
    peaks = datasheet_peaks("NVIDIA H200")
    assert peaks is not None and peaks.tf["fp8"] == 1979 and "mxfp8" in peaks.absent


D, F = 128, 128
CASES = [("inference", "staged", 1.5), ("training", "standard", 1.0)]


def _matrix() -> str:
    lines = ["seed = 5", "[shape]", "T = 32", f"D = {D}", "E = 4", "K = 2", "[timing]",
             "windows = 2", "iterations = 1", "warmup = 1", "warmup_ms = 0"]
    for mode, pipeline, imbalance in CASES:
        lines += ["[[case]]", f'mode = "{mode}"', "ep = 2", 'precision = "fp8"',
                  f'pipeline = "{pipeline}"', f"F = {F}", f"imbalance = {imbalance}",
                  'category = "tiny"']
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, runner_server: tuple[ServerProcess, str]
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    tmp: Path = tmp_path_factory.mktemp("fp8")
    posted = run_posted(runner_server, tmp, _matrix(), timeout=240)
    return posted.out, posted.served


@pytest.mark.live
def test_fp8_cases_run_emulated_and_ingest(report: tuple[dict[str, Any], dict[str, Any]]
                                           ) -> None:
    written, served = report
    validate_report(written)
    ids = [CaseSpec(m, 2, "fp8", p, "tiny", F, i).id for m, p, i in CASES]
    assert [c["id"] for c in served["cases"]] == ids
    assert written["meta"]["host"]["nativeScaledGEMM"]["fp8"] is False
    assert "CUDA" in written["meta"]["host"]["fp8Native"]["reason"]
    for raw in written["cases"]:
        assert raw["emulated"] is True and raw["fp8Scaling"] == "blockwise"
        assert raw["numericalAccepted"] is True
        case = Case.model_validate(raw)
        derived = derive(validate_report(written).meta, case)
        assert derived.percentOfMeasuredCeiling is None  # emulated: no ceiling of its own


@pytest.mark.live
def test_fp8_dispatch_moves_d_plus_4d_over_128_bytes_a_row(
        report: tuple[dict[str, Any], dict[str, Any]]) -> None:
    staged = report[0]["cases"][0]
    per_row = D + 4 * D // 128  # 132
    for rank, rows in enumerate(staged["receiveRows"]):
        moved = staged["dispatchLocalBytes"][rank] + staged["dispatchRemoteBytes"][rank]
        assert moved == rows * per_row
    standard = report[0]["cases"][1]  # unquantized dispatch: bf16 rows
    for rank, rows in enumerate(standard["receiveRows"]):
        assert standard["dispatchLocalBytes"][rank] + standard["dispatchRemoteBytes"][rank] \
            == rows * 2 * D


# --- native fp8 GEMMs on the CPU ----------------------------------------------------------
# Rowwise torch._scaled_mm runs on the CPU; the blockwise one (cuBLAS, sm_90) and
# torch._scaled_grouped_mm (CUTLASS, sm_90/sm_100) do not, so they are replaced by CPU
# renderings that first check the layouts ScaledBlas.cpp / GroupedBlas.cpp accept
# (tests/scaled_mm_cpu.py).

@pytest.fixture
def fp8_recipe() -> Any:
    saved = (native.FP8.scaling, native.FP8.grouped)
    yield native.FP8
    native.FP8.scaling, native.FP8.grouped = saved


def _by_hand(rows: torch.Tensor, experts: Any, counts: list[int], weight: Any, act: Any
             ) -> torch.Tensor:
    """The SwiGLU experts on the recipe's grid, float32 products rounded to bf16 where the
    GEMMs output bf16: ``weight`` / ``act`` put a [out, in] weight / [rows, K] activation
    on the grid."""
    x, out, start = act(rows), [], 0
    for e, n in enumerate(counts):
        xe = x[start:start + n]
        g, u = (weight(w[e].t()).t() for w in (experts.gate, experts.up))
        gate, up = (xe @ g).bfloat16(), (xe @ u).bfloat16()
        out.append(((torch.nn.functional.silu(gate) * up).float(), e))
        start += n
    h = act(torch.cat([o for o, _ in out]))
    ends = [0, *torch.tensor(counts).cumsum(0).tolist()]
    return torch.cat([h[ends[e]:ends[e + 1]] @ weight(experts.down[e].t()).t()
                      for _, e in out])


def _rowwise(m: torch.Tensor) -> torch.Tensor:
    data, scale = quantize_fp8_rowwise(m)
    return data.view(torch.float8_e4m3fn).float() * scale


@pytest.mark.parametrize("recipe", ["rowwise", "blockwise", "grouped"])
def test_native_fp8_experts_match_the_recipe_by_hand(
        recipe: str, fp8_recipe: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.expert_kernels import EXPERT_KERNELS, experts_loop, experts_native
    from runner.experts import make_experts, quantize_experts

    fp8_recipe.scaling = "blockwise" if recipe == "blockwise" else "rowwise"
    fp8_recipe.grouped = recipe == "grouped"
    if recipe == "blockwise":
        monkeypatch.setattr(torch, "_scaled_mm", blockwise_mm)
    if recipe == "grouped":
        monkeypatch.setattr(torch, "_scaled_grouped_mm", grouped_mm, raising=False)
    counts = [5, 0, 11]
    experts = quantize_experts(make_experts(128, 256, 0, 3, 7, torch.bfloat16,
                                            torch.device("cpu")), "fp8", native=True)
    rows = torch.randn(16, 128, generator=torch.Generator().manual_seed(2)).bfloat16()
    offs = torch.tensor(counts).cumsum(0).to(torch.int32)
    EXPERT_KERNELS.reset()
    with torch.no_grad():
        got = experts_native(experts_loop)(rows, experts, counts, offs, "fp8")
    if recipe == "blockwise":
        want = _by_hand(rows.float(), experts, counts,
                        lambda w: fake_quantize_weight(w.float(), "fp8"),
                        lambda a: fake_quantize(a.float(), "fp8"))
    else:
        want = _by_hand(rows.float(), experts, counts, _rowwise, _rowwise)
    assert float((got.float() - want).norm() / want.norm()) < 1e-2
    assert EXPERT_KERNELS.scaling == fp8_recipe.scaling
    assert EXPERT_KERNELS.kernel == ("scaled_grouped_mm" if recipe == "grouped"
                                     else "scaled_mm_loop")
