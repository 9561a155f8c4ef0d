"""Native block-scaled GEMMs (``torch._scaled_mm``) where the start-up probe ran them.

mxfp8: e4m3 data with one e8m0 scale per 32 elements along K; nvfp4: e2m1 data packed two
a byte with one e4m3 scale per 16 elements, and one fp32 tensor scale per operand (applied
to the bf16 product, which is exact up to the output rounding). The block scales go to
cuBLAS in its swizzled layout (``swizzle``). Only the inference forward runs natively:
there is no scaled-GEMM backward here, so with gradients enabled the experts emulate
(quantize -> dequantize -> bf16 GEMM). ``USAGE`` counts which path each expert call took
so a case says ``"emulated": false`` only when every one of them ran natively.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runner.quant import quantize_mxfp8, quantize_nvfp4


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


def scaled_gemm(x: torch.Tensor, w: torch.Tensor, precision: str) -> torch.Tensor:
    """``x @ w`` ([n, K] @ [K, N] -> [n, N] bf16) with both operands quantized along K."""
    wt = w.t().contiguous()  # [N, K]: quantized along K, and column-major once transposed
    if precision == "mxfp8":
        xd, xs = quantize_mxfp8(x)
        wd, ws = quantize_mxfp8(wt)
        return torch._scaled_mm(
            xd.view(torch.float8_e4m3fn), wd.view(torch.float8_e4m3fn).t(),
            swizzle(xs).view(torch.float8_e8m0fnu), swizzle(ws).view(torch.float8_e8m0fnu),
            out_dtype=torch.bfloat16)
    if precision == "nvfp4":
        xp, xs, xt = quantize_nvfp4(x)
        wp, ws, wt_scale = quantize_nvfp4(wt)
        y = torch._scaled_mm(
            xp.view(torch.float4_e2m1fn_x2), wp.view(torch.float4_e2m1fn_x2).t(),
            swizzle(xs).view(torch.float8_e4m3fn), swizzle(ws).view(torch.float8_e4m3fn),
            out_dtype=torch.bfloat16)
        return (y.float() * (xt * wt_scale)).to(torch.bfloat16)
    raise ValueError(f"precision: no native scaled GEMM for {precision!r}")
