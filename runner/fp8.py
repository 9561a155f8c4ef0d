"""fp8 (e4m3) with fp32 scales, DeepSeek-V3's recipe, exactly: quantize and dequantize.

- Activations (rows): one fp32 scale per 128 consecutive elements of a row (1x128),
  scale = amax / 448, so the block's largest element lands on e4m3's 448. A row of n
  elements takes n + 4 n / 128 bytes on the wire (``quant.wire_width``).
- Weights ([out, in], blocks along ``in``, the GEMM's reduction): one fp32 scale per
  128 x 128 tile, scale = tile amax / 448.
- Rowwise (``rowwise``): one fp32 scale per row; what ``torch._scaled_grouped_mm`` and
  the Blackwell ``torch._scaled_mm`` take (the 1x128 / 128x128 GEMM is cuBLAS on sm_90
  only), so a case records which of the two its native GEMMs used.

An all-zero block gets scale 1 (its elements are 0 either way). Dimensions must be
multiples of 128 (the analytical model rejects other widths for fp8).
"""

from __future__ import annotations

import torch

FP8_BLOCK = 128
E4M3_MAX = 448.0


def _scale(amax: torch.Tensor) -> torch.Tensor:
    return torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))


def _to_e4m3(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    scaled = (x / scale).clamp(-E4M3_MAX, E4M3_MAX)
    return scaled.to(torch.float8_e4m3fn).view(torch.uint8)


def _row_blocks(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1]
    if n % FP8_BLOCK:
        raise ValueError(f"last dimension {n} is not a multiple of the fp8 block {FP8_BLOCK}")
    return x.float().reshape(*x.shape[:-1], n // FP8_BLOCK, FP8_BLOCK)


def quantize_fp8_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(e4m3 bytes shaped like x, fp32 scales [..., n/128]): 1x128 blocks along rows."""
    blocks = _row_blocks(x)
    scale = _scale(blocks.abs().amax(-1, keepdim=True))
    return _to_e4m3(blocks, scale).reshape(x.shape), scale.squeeze(-1)


def dequantize_fp8_rows(data: torch.Tensor, scales: torch.Tensor,
                        dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    values = _row_blocks(data.view(torch.float8_e4m3fn).float())
    return (values * scales.float().unsqueeze(-1)).reshape(data.shape).to(dtype)


def _tiles(w: torch.Tensor) -> torch.Tensor:
    rows, cols = w.shape
    if rows % FP8_BLOCK or cols % FP8_BLOCK:
        raise ValueError(f"weight {rows}x{cols} does not split into {FP8_BLOCK}x{FP8_BLOCK} "
                         f"tiles")
    tiles = w.float().reshape(rows // FP8_BLOCK, FP8_BLOCK, cols // FP8_BLOCK, FP8_BLOCK)
    return tiles.permute(0, 2, 1, 3)  # [row tile, col tile, 128, 128]


def quantize_fp8_tiles(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(e4m3 bytes [rows, cols], fp32 scales [rows/128, cols/128]) of a 2-D weight."""
    tiles = _tiles(w)
    scale = _scale(tiles.abs().amax((-2, -1), keepdim=True))
    data = _to_e4m3(tiles, scale).permute(0, 2, 1, 3).reshape(w.shape)
    return data, scale.reshape(scale.shape[0], scale.shape[1])


def dequantize_fp8_tiles(data: torch.Tensor, scales: torch.Tensor,
                         dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    tiles = _tiles(data.view(torch.float8_e4m3fn).float())
    values = tiles * scales.float()[:, :, None, None]
    return values.permute(0, 2, 1, 3).reshape(data.shape).to(dtype)


def quantize_fp8_rowwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(e4m3 bytes shaped like x, fp32 scales [..., 1]): one scale per row."""
    scale = _scale(x.float().abs().amax(-1, keepdim=True))
    return _to_e4m3(x.float(), scale), scale


def fake_quantize_fp8(x: torch.Tensor, weight: bool = False) -> torch.Tensor:
    """x on the fp8 grid in x's dtype (``weight``: 128x128 tiles of a 2-D [out, in]
    weight; else 1x128 along rows)."""
    if weight:
        return dequantize_fp8_tiles(*quantize_fp8_tiles(x.detach()), dtype=x.dtype)
    return dequantize_fp8_rows(*quantize_fp8_rows(x.detach()), dtype=x.dtype)
