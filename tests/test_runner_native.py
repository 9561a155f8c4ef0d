"""Native block-scaled GEMMs: the operands and scales handed to ``torch._scaled_mm``.

No GPU here: ``torch._scaled_mm`` is replaced by a CPU rendering of cuBLAS's documented
semantics (swizzled block scales, B column-major), so the test checks what the runner
prepares; the start-up probe checks the same function against emulation on a GPU."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from runner.expert_kernels import experts_loop, experts_native
from runner.experts import make_experts
from runner.native import USAGE, scaled_gemm, swizzle
from runner.quant import dequantize_nvfp4, fake_quantize


def position(r: int, c: int, cols: int) -> int:
    """cuBLAS's block-scale layout: 128x4 tiles of 512 bytes, row-major over tiles."""
    tile = (r // 128) * (-(-cols // 4)) + c // 4
    return tile * 512 + (r % 32) * 16 + (r % 128) // 32 * 4 + c % 4


@pytest.mark.parametrize(("rows", "cols"), [(128, 4), (200, 7), (3, 2)])
def test_swizzle_puts_each_scale_where_cublas_reads_it(rows: int, cols: int) -> None:
    scales = torch.arange(rows * cols, dtype=torch.int32).reshape(rows, cols)
    flat = swizzle(scales)
    assert flat.numel() == -(-rows // 128) * 128 * -(-cols // 4) * 4
    for r in range(rows):
        for c in range(cols):
            assert flat[position(r, c, cols)] == scales[r, c]


def unswizzle(flat: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    index = torch.tensor([[position(r, c, cols) for c in range(cols)] for r in range(rows)])
    return flat[index]


def cublas_semantics(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                     scale_b: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    def decode(m: torch.Tensor, s: torch.Tensor) -> torch.Tensor:  # m: [rows, K(/2)]
        if m.dtype == torch.float8_e4m3fn:
            scales = torch.exp2(unswizzle(s.view(torch.uint8), m.shape[0],
                                          m.shape[1] // 32).float() - 127)
            return (m.float().reshape(m.shape[0], -1, 32) * scales[..., None]).flatten(1)
        raw = unswizzle(s.view(torch.uint8), m.shape[0], m.shape[1] * 2 // 16)
        return dequantize_nvfp4(m.view(torch.uint8), raw, torch.tensor(1.0), torch.float32)

    assert b.t().is_contiguous(), "B must be column-major"
    return (decode(a, scale_a) @ decode(b.t(), scale_b).t()).to(out_dtype)


@pytest.fixture
def cpu_scaled_mm(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
             out_dtype: torch.dtype, **_: Any) -> torch.Tensor:
        return cublas_semantics(a, b, scale_a, scale_b, out_dtype)

    monkeypatch.setattr(torch, "_scaled_mm", fake)


@pytest.mark.parametrize("precision", ["mxfp8", "nvfp4"])
def test_scaled_gemm_is_the_product_of_the_quantized_operands(
        cpu_scaled_mm: None, precision: str) -> None:
    g = torch.Generator().manual_seed(4)
    x = torch.randn(130, 64, generator=g).bfloat16()
    w = torch.randn(64, 96, generator=g).bfloat16()
    got = scaled_gemm(x, w, precision).float()
    want = fake_quantize(x, precision).float() @ fake_quantize(w.t(), precision).t().float()
    assert ((got - want).norm() / want.norm()) < 1e-2
    assert ((got - x.float() @ w.float()).norm() / want.norm()) > 1e-3  # it did quantize


def test_native_experts_only_without_gradients(cpu_scaled_mm: None) -> None:
    experts = make_experts(64, 64, 0, 2, 1, torch.bfloat16, torch.device("cpu"))
    rows = torch.randn(40, 64, generator=torch.Generator().manual_seed(5)).bfloat16()
    counts, offs = [25, 15], torch.tensor([25, 40], dtype=torch.int32)
    native = experts_native(experts_loop)
    USAGE.reset()
    with torch.no_grad():
        got = native(rows, experts, counts, offs, "mxfp8")
    assert (USAGE.native, USAGE.emulated, USAGE.all_native) == (1, 0, True)
    want = experts_loop(rows, experts, counts, offs, "mxfp8")
    assert ((got.float() - want.float()).norm() / want.float().norm()) < 2e-2
    USAGE.reset()
    emulated = native(rows, experts, counts, offs, "mxfp8")  # gradients enabled: emulated
    assert torch.equal(emulated, want)
    assert (USAGE.native, USAGE.emulated, USAGE.all_native) == (0, 1, False)
