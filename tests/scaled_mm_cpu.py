"""CPU renderings of the fp8 scaled GEMMs the CPU's torch does not run: the blockwise
``torch._scaled_mm`` (cuBLAS, sm_90) and ``torch._scaled_grouped_mm`` (CUTLASS, sm_90 /
sm_100). Each first checks the layouts ScaledBlas.cpp / GroupedBlas.cpp accept (torch
2.9-2.13), then computes the product from the decoded operands in float32."""

from __future__ import annotations

from typing import Any

import torch


def decode(data: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """e4m3 [rows, K] times fp32 scales [rows, K/128] or [rows/128, K/128] or [rows, 1]."""
    v = data.float()
    rows, k = v.shape
    if scales.shape == (rows, 1):
        return v * scales
    if scales.shape == (rows, k // 128):
        return v * scales.repeat_interleave(128, 1)
    return v * scales.repeat_interleave(128, 0).repeat_interleave(128, 1)


def _size_stride(t: torch.Tensor, dim: int, size: int, stride: int) -> bool:
    """ScaledBlas.cpp's check_size_stride: a dimension of size 1 has no meaningful stride."""
    return t.shape[dim] == size and (size <= 1 or t.stride(dim) == stride)


def _is_1x128(t: torch.Tensor, scale: torch.Tensor) -> bool:
    """ScaledBlas.cpp's is_blockwise_1x128_scaling: (rows, K/128), outer-dim-major."""
    rows, k = t.shape
    return _size_stride(scale, 0, rows, 1) and _size_stride(scale, 1, k // 128, rows)


def _is_128x128(t: torch.Tensor, scale: torch.Tensor) -> bool:
    """ScaledBlas.cpp's is_blockwise_128x128_scaling: (rows/128, K/128), row stride K/128."""
    rows, k = t.shape
    return (_size_stride(scale, 0, rows // 128, k // 128)
            and _size_stride(scale, 1, k // 128, 1))


def blockwise_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                 scale_b: torch.Tensor, out_dtype: torch.dtype, **_: Any) -> torch.Tensor:
    """(1x128, 128x128) or (1x128, 1x128), the pairs ScaledBlas.cpp's get_joint_scaling
    lists for an activation ``a``; ``b`` checked as b.t() with scale_b.t()."""
    assert a.is_contiguous(), "A row-major"
    assert b.t().is_contiguous(), "B column-major"
    assert a.shape[1] % 16 == 0 and b.shape[0] % 16 == 0 and b.shape[1] % 16 == 0
    assert _is_1x128(a, scale_a), "scale_a 1x128 outer-dim-major"
    bt, sb = b.t(), scale_b.t()
    assert _is_128x128(bt, sb) or _is_1x128(bt, sb), "scale_b 128x128 or 1x128"
    return (decode(a, scale_a) @ decode(bt, sb).t()).to(out_dtype)


def grouped_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
               scale_b: torch.Tensor, offs: torch.Tensor, out_dtype: torch.dtype,
               **_: Any) -> torch.Tensor:
    """The 2-D x 3-D rowwise ``_scaled_grouped_mm``: a [n, K], b [E, K, N] (transposed
    storage), scales [n] and [E, N]."""
    groups, k, n = b.shape
    assert a.is_contiguous() and b.transpose(-2, -1).is_contiguous(), "mat2 transposed"
    assert scale_a.shape == (a.shape[0],) and scale_b.shape == (groups, n)
    assert offs.dtype == torch.int32 and offs.shape == (groups,)
    ends = [0, *offs.tolist()]
    return torch.cat([(a[s:e].float() * scale_a[s:e, None]) @ (b[g].float() * scale_b[g])
                      for g, (s, e) in enumerate(zip(ends, ends[1:], strict=False))]
                     ).to(out_dtype)
