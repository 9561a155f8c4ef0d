"""Native block-scaled GEMMs (``torch._scaled_mm``) where the start-up probe ran them.

mxfp8: e4m3 data with one e8m0 scale per 32 elements along K; nvfp4: e2m1 data packed two
a byte with one e4m3 scale per 16 elements, and one fp32 tensor scale per operand (applied
to the bf16 product, which is exact up to the output rounding). The block scales go to
cuBLAS in its swizzled layout (``swizzle``). mxfp8/nvfp4 run natively in the inference
forward only: there is no scaled-GEMM backward for them here, so with gradients enabled
they emulate (quantize -> dequantize -> bf16 GEMM); fp8 also trains natively
(``runner.fp8_autograd``). ``USAGE`` counts which path each expert call took
so a case says ``"emulated": false`` only when every one of them ran natively.

fp8 (``runner.fp8``) takes fp32 scales in one of two recipes, ``FP8.scaling``, set by the
start-up probe (``runner.fp8_probe``): "blockwise" (1x128 activations, 128x128 weights;
cuBLAS, sm_90 only) or "rowwise" (one scale per row; CUTLASS on sm_90 and sm_100, and the
only fp8 recipe of ``torch._scaled_grouped_mm``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runner.fp8 import (
    dequantize_fp8_rows,
    quantize_fp8_rows,
    quantize_fp8_rowwise,
    quantize_fp8_tiles,
)
from runner.quant import quantize_mxfp8, quantize_nvfp4, wire_parts


@dataclass
class Usage:
    native: int = 0
    emulated: int = 0

    def reset(self) -> None:
        self.native = self.emulated = 0

    @property
    def all_native(self) -> bool:
        return self.native > 0 and self.emulated == 0


USAGE = Usage()
FP8_SCALINGS = ("blockwise", "rowwise")


@dataclass
class Fp8Native:
    """How native fp8 GEMMs run here (the start-up probe's finding): the scaling recipe,
    and whether the experts go through one ``torch._scaled_grouped_mm`` (rowwise) or a
    ``torch._scaled_mm`` per expert."""

    scaling: str = "blockwise"
    grouped: bool = False


FP8 = Fp8Native()


def swizzle(scales: torch.Tensor) -> torch.Tensor:
    """A [rows, cols] block-scale matrix in cuBLAS's layout for block-scaled GEMMs:
    padded to 128-row x 4-column tiles, each tile stored as 512 bytes where scale (r, c)
    lands at (r % 32) * 16 + (r % 128) // 32 * 4 + c % 4; flattened."""
    rows, cols = scales.shape
    row_tiles, col_tiles = -(-rows // 128), -(-cols // 4)
    padded = scales.new_zeros((row_tiles * 128, col_tiles * 4))
    padded[:rows, :cols] = scales
    tiles = padded.view(row_tiles, 128, col_tiles, 4).permute(0, 2, 1, 3)
    return tiles.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1).contiguous()


@dataclass(frozen=True)
class Operand:
    """One GEMM operand as ``torch._scaled_mm`` takes it, quantized along K: ``data``
    [rows, K] (nvfp4: [rows, K/2], two codes a byte), the block scales (raw, [rows, K/block])
    and the fp32 tensor scale (nvfp4; None for mxfp8)."""

    data: torch.Tensor
    scales: torch.Tensor
    tensor_scale: torch.Tensor | None

    def rows(self, start: int, stop: int) -> Operand:
        """Rows start..stop (blocks run along a row, so a slice is still quantized)."""
        return Operand(self.data[start:stop], self.scales[start:stop], self.tensor_scale)


def quantize_operand(m: torch.Tensor, precision: str, weight: bool = False) -> Operand:
    """``m`` [rows, K] quantized along K, once (a weight when the layer is built;
    ``weight``: fp8's 128x128 tiles under the blockwise recipe)."""
    if precision == "fp8":
        if FP8.scaling == "rowwise":
            return Operand(*quantize_fp8_rowwise(m), None)
        return Operand(*(quantize_fp8_tiles(m) if weight else quantize_fp8_rows(m)), None)
    if precision == "mxfp8":
        return Operand(*quantize_mxfp8(m), None)
    if precision == "nvfp4":
        return Operand(*quantize_nvfp4(m))
    raise ValueError(f"precision: no native scaled GEMM for {precision!r}")


def wire_operand(wire: torch.Tensor, precision: str, n: int) -> Operand:
    """Received wire rows (``quant.pack_rows``) of n elements as a GEMM operand, with the
    senders' block scales: no second quantization. nvfp4: ``_scaled_mm`` takes one fp32
    tensor scale per operand, so the dispatch agrees one over its group (the senders'
    largest amax, ``runner.collectives``); every row carries it (zero bytes in padded rows)."""
    data, scales, tensor_scales = wire_parts(wire, precision, n)
    if precision == "fp8" and FP8.scaling == "rowwise":  # the wire's 1x128 scales, rescaled
        return quantize_operand(dequantize_fp8_rows(data, scales), precision)
    if tensor_scales is None:
        return Operand(data, scales, None)
    if tensor_scales.numel() == 0:
        return Operand(data, scales, torch.ones((), device=wire.device))
    return Operand(data, scales, tensor_scales.amax())


def gemm(a: Operand, b: Operand, precision: str) -> torch.Tensor:
    """``a @ b.T`` ([n, K] x [N, K] -> [n, N] bf16) through ``torch._scaled_mm``; the block
    scales go in cuBLAS's swizzled layout (a layout change, no quantization)."""
    if precision == "fp8":
        return _fp8_gemm(a, b)
    if precision == "mxfp8":
        return torch._scaled_mm(
            a.data.view(torch.float8_e4m3fn), b.data.view(torch.float8_e4m3fn).t(),
            swizzle(a.scales).view(torch.float8_e8m0fnu),
            swizzle(b.scales).view(torch.float8_e8m0fnu), out_dtype=torch.bfloat16)
    if precision == "nvfp4":
        assert a.tensor_scale is not None and b.tensor_scale is not None
        y = torch._scaled_mm(
            a.data.view(torch.float4_e2m1fn_x2), b.data.view(torch.float4_e2m1fn_x2).t(),
            swizzle(a.scales).view(torch.float8_e4m3fn),
            swizzle(b.scales).view(torch.float8_e4m3fn), out_dtype=torch.bfloat16)
        return (y.float() * (a.tensor_scale * b.tensor_scale)).to(torch.bfloat16)
    raise ValueError(f"precision: no native scaled GEMM for {precision!r}")


def _fp8_gemm(a: Operand, b: Operand) -> torch.Tensor:
    """ScaledBlas.cpp's layouts: blockwise, scale_a [n, K/128] outer-dim-major and
    scale_b [K/128, N/128] with scale_b.t() contiguous, or (``b`` 1x128 along K, the
    Wgrad of runner.fp8_autograd: ``b.scales`` [N, K/128]) scale_b [K/128, N] contiguous,
    so that scale_b.t() is outer-dim-major; rowwise, scale_a [n, 1] and scale_b [1, N]."""
    e4m3 = torch.float8_e4m3fn
    rowwise = FP8.scaling == "rowwise"
    scale_a = a.scales if rowwise else a.scales.t().contiguous().t()
    b_rows = not rowwise and b.scales.shape[0] == b.data.shape[0] > 0
    scale_b = b.scales.t().contiguous() if b_rows else b.scales.t()
    return torch._scaled_mm(a.data.view(e4m3), b.data.view(e4m3).t(), scale_a, scale_b,
                            out_dtype=torch.bfloat16)


def fp8_grouped_gemm(x: Operand, w: Operand, offs: torch.Tensor) -> torch.Tensor:
    """All experts' rows in one ``torch._scaled_grouped_mm`` (rowwise): x [n, K] with
    scales [n, 1]; w [E, N, K] with scales [E, N, 1]; ``offs`` the groups' int32 ends."""
    e4m3 = torch.float8_e4m3fn
    return torch._scaled_grouped_mm(
        x.data.view(e4m3), w.data.view(e4m3).transpose(-2, -1), x.scales.reshape(-1),
        w.scales.squeeze(-1), offs=offs, out_dtype=torch.bfloat16)


def stack_operands(operands: list[Operand]) -> Operand:
    """One expert-major operand ([E, N, K], scales [E, ...]) of per-expert ones."""
    return Operand(torch.stack([o.data for o in operands]),
                   torch.stack([o.scales for o in operands]), None)


def scaled_gemm(x: torch.Tensor, w: torch.Tensor, precision: str) -> torch.Tensor:
    """``x @ w`` ([n, K] @ [K, N] -> [n, N] bf16) with both operands quantized along K (the
    start-up probe's one-off; the layer quantizes its weights once, see runner.experts)."""
    # [N, K]: quantized along K, and column-major once transposed
    return gemm(quantize_operand(x, precision),
                quantize_operand(w.t().contiguous(), precision, weight=True), precision)
