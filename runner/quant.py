"""The block formats, exactly: MXFP8 and NVFP4 quantize and dequantize (fp8 with fp32
scales: ``runner.fp8``), and every quantized precision's wire rows.

- mxfp8 (OCP MX): e4m3 elements, one e8m0 scale (a power of two, stored as its biased
  exponent byte) per 32 consecutive elements: scale = 2^ceil(log2(amax / 448)), so the
  block's largest element fits e4m3's +-448 without saturating.
- nvfp4: e2m1 elements (+-{0, .5, 1, 1.5, 2, 3, 4, 6}) packed two per byte (even element
  in the low nibble), one e4m3 scale per 16 elements, and one fp32 scale per tensor:
  tensor_scale = amax / (6 * 448) (``nvfp4_tensor_scale``, the one recipe of the emulated
  and the native paths), block scale = block_amax / 6 / tensor_scale in e4m3. Elements
  round to the nearest e2m1 value, ties to the even code (0.75 -> 1, 1.75 -> 2,
  3.5 -> 4), as the format and the hardware's conversions do.

Every quantizer takes zero rows (a rank or an expert that received nothing) and returns
zero rows.

Blocks run along the last dimension, which must be a multiple of the block size. Where
no native scaled GEMM exists the runner computes ``dequantize(quantize(x))`` in bf16:
the numerics of the format, not its speed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch

from runner.fp8 import FP8_BLOCK, dequantize_fp8_rows, fake_quantize_fp8, quantize_fp8_rows

MX_BLOCK = 32
NV_BLOCK = 16
E4M3_MAX = 448.0
E2M1_MAX = 6.0
E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
# Each midpoint between neighbouring grid values, and whether a tie there rounds up: to
# the even code (codes are the grid's indices; an odd lower code means the upper is even).
_E2M1_MIDPOINTS = tuple(((lo + hi) / 2, index % 2 == 1)
                        for index, (lo, hi) in enumerate(itertools.pairwise(E2M1_GRID)))


def _blocks(x: torch.Tensor, size: int) -> torch.Tensor:
    n = x.shape[-1]
    if n % size:
        raise ValueError(f"last dimension {n} is not a multiple of the block size {size}")
    return x.float().reshape(*x.shape[:-1], n // size, size)


def quantize_mxfp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(e4m3 bytes shaped like x, e8m0 scale bytes [..., n/32])."""
    blocks = _blocks(x, MX_BLOCK)
    amax = blocks.abs().amax(-1, keepdim=True)
    # The smallest power of two that brings the block's amax within e4m3's 448: no
    # element saturates (OCP's floor(log2(amax)) - 8 would clip up to 12.5 % off the
    # largest ones; cuBLAS and Transformer Engine round up like this).
    exponent = torch.where(amax > 0, torch.ceil(torch.log2(amax / E4M3_MAX)),
                           torch.full_like(amax, -127.0)).clamp(-127, 127)
    scaled = (blocks / torch.exp2(exponent)).clamp(-E4M3_MAX, E4M3_MAX)
    data = scaled.to(torch.float8_e4m3fn).view(torch.uint8).reshape(x.shape)
    scales = (exponent.squeeze(-1) + 127).to(torch.uint8)
    return data, scales


def dequantize_mxfp8(data: torch.Tensor, scales: torch.Tensor,
                     dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    values = _blocks(data.view(torch.float8_e4m3fn).float(), MX_BLOCK)
    scale = torch.exp2(scales.float() - 127).unsqueeze(-1)
    return (values * scale).reshape(data.shape).to(dtype)


def nvfp4_tensor_scale(x: torch.Tensor,
                       agree: Callable[[torch.Tensor], torch.Tensor] | None = None
                       ) -> torch.Tensor:
    """The fp32 per-tensor scale: amax / (6 * 448), so the largest block scale fits e4m3;
    1 for an all-zero or empty tensor. ``agree``: the amax agreed with other ranks (their
    maximum), so rows they quantize share this scale; called for empty x too."""
    amax = (x.detach().float().abs().amax() if x.numel()  # amax() of nothing raises
            else torch.zeros((), dtype=torch.float32, device=x.device))
    if agree is not None:
        amax = agree(amax)
    return torch.where(amax > 0, amax / (E2M1_MAX * E4M3_MAX), torch.ones_like(amax))


def quantize_nvfp4(x: torch.Tensor, tensor_scale: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(packed e2m1 bytes [..., n/2], e4m3 scale bytes [..., n/16], fp32 tensor scale);
    ``tensor_scale``: one made by ``nvfp4_tensor_scale`` (default: x's own)."""
    blocks = _blocks(x, NV_BLOCK)
    if tensor_scale is None:
        tensor_scale = nvfp4_tensor_scale(x)
    block_amax = blocks.abs().amax(-1, keepdim=True)
    block_scale = (block_amax / E2M1_MAX / tensor_scale).clamp(max=E4M3_MAX)
    block_scale = block_scale.to(torch.float8_e4m3fn)
    scale = block_scale.float() * tensor_scale
    scaled = torch.where(scale > 0, blocks / torch.where(scale > 0, scale, 1.0), 0.0)
    # Nearest grid point by counting the midpoints below (no host->device tensor, so
    # this can run inside a CUDA-graph capture); a tie counts when it rounds up to even.
    magnitude = scaled.abs()
    index = torch.zeros_like(magnitude, dtype=torch.int64)
    for midpoint, tie_up in _E2M1_MIDPOINTS:
        above = magnitude >= midpoint if tie_up else magnitude > midpoint
        index += above.to(torch.int64)
    codes = (index | (scaled < 0).to(torch.int64) << 3).to(torch.uint8)
    codes = codes.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    packed = codes[..., 0] | (codes[..., 1] << 4)
    return packed, block_scale.view(torch.uint8).squeeze(-1), tensor_scale.float()


def dequantize_nvfp4(packed: torch.Tensor, scales: torch.Tensor, tensor_scale: torch.Tensor,
                     dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    codes = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(
        *packed.shape[:-1], packed.shape[-1] * 2).long()
    c = (codes & 7).float()
    # E2M1_GRID by formula: 0, .5, 1, 1.5 below code 4; then 2^(e+1) * (1 + m/2).
    high = torch.exp2(torch.floor((c - 4) / 2) + 1) * (1 + 0.5 * torch.remainder(c - 4, 2))
    values = torch.where(c < 4, c * 0.5, high) * torch.where(codes >= 8, -1.0, 1.0)
    if tensor_scale.dim():  # one per row ([R, 1]) after a wire transfer
        tensor_scale = tensor_scale.unsqueeze(-1)
    block = scales.view(torch.float8_e4m3fn).float().unsqueeze(-1) * tensor_scale
    return (_blocks(values, NV_BLOCK) * block).reshape(values.shape).to(dtype)


def fake_quantize(x: torch.Tensor, precision: str) -> torch.Tensor:
    """x on the precision's grid, in x's dtype; gradients pass straight through."""
    if precision == "bf16":
        return x
    if precision == "mxfp8":
        q = dequantize_mxfp8(*quantize_mxfp8(x.detach()), dtype=x.dtype)
    elif precision == "nvfp4":
        q = dequantize_nvfp4(*quantize_nvfp4(x.detach()), dtype=x.dtype)
    elif precision == "fp8":
        q = fake_quantize_fp8(x)
    else:
        raise ValueError(f"precision: unknown {precision!r}")
    return x + (q - x).detach() if x.requires_grad else q


def fake_quantize_weight(w: torch.Tensor, precision: str) -> torch.Tensor:
    """A 2-D [out, in] weight on the precision's grid: blocks along ``in`` as
    ``fake_quantize``'s, except fp8's 128x128 tiles."""
    if precision != "fp8":
        return fake_quantize(w, precision)
    q = fake_quantize_fp8(w, weight=True)
    return w + (q - w).detach() if w.requires_grad else q


def wire_width(precision: str, n: int) -> int:
    """Bytes a row of n elements takes on the wire: data, block scales, (tensor scale)."""
    if precision == "mxfp8":
        return n + n // MX_BLOCK
    if precision == "nvfp4":
        return n // 2 + n // NV_BLOCK + 4
    if precision == "fp8":
        return n + 4 * (n // FP8_BLOCK)  # e4m3 bytes, an fp32 scale per 128
    raise ValueError(f"precision: {precision!r} has no quantized wire format")


def pack_rows(x: torch.Tensor, precision: str,
              agree: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """Rows [R, n] as uint8 wire rows [R, wire_width]: data, then scales (then fp32
    tensor scale, repeated per row so any split of the rows carries it; ``agree``: see
    ``nvfp4_tensor_scale``)."""
    if precision == "mxfp8":
        data, scales = quantize_mxfp8(x)
        return torch.cat([data, scales], dim=-1)
    if precision == "fp8":
        data, fp32 = quantize_fp8_rows(x)
        return torch.cat([data, fp32.contiguous().view(torch.uint8)], dim=-1)
    packed, scales, tensor_scale = quantize_nvfp4(x, nvfp4_tensor_scale(x, agree))
    ts = tensor_scale.reshape(1).view(torch.uint8).expand(x.shape[0], 4)
    return torch.cat([packed, scales, ts], dim=-1)


def wire_parts(wire: torch.Tensor, precision: str, n: int
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Wire rows (``pack_rows``) of n elements split back into data, block scales and
    (nvfp4) the per-row fp32 tensor scales [R, 1]; copies of the bytes, nothing decoded."""
    if precision == "mxfp8":
        return wire[:, :n].contiguous(), wire[:, n:].contiguous(), None
    if precision == "fp8":  # the block scales as fp32 [R, n/128]
        return wire[:, :n].contiguous(), wire[:, n:].contiguous().view(torch.float32), None
    half, blocks = n // 2, n // NV_BLOCK
    return (wire[:, :half].contiguous(), wire[:, half:half + blocks].contiguous(),
            wire[:, half + blocks:].contiguous().view(torch.float32))


def unpack_rows(wire: torch.Tensor, precision: str, n: int,
                dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    data, scales, tensor_scales = wire_parts(wire, precision, n)
    if precision == "fp8":
        return dequantize_fp8_rows(data, scales, dtype)
    if tensor_scales is None:
        return dequantize_mxfp8(data, scales, dtype)
    return dequantize_nvfp4(data, scales, tensor_scales, dtype)
