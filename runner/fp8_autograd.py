"""fp8 training through torch's scaled GEMMs: all three GEMMs of each expert linear in
e4m3 (DeepSeek-V3's recipe), Fprop x·W, Dgrad dy·Wᵀ and Wgrad xᵀ·dy, fp32 accumulation,
bf16 outputs; the optimizer side is out of scope.

Every GEMM is ``runner.native.gemm`` (``a @ b.T``, both operands quantized along the
reduction) or, fp8 rowwise grouped, ``fp8_grouped_gemm``; the recipe is ``FP8.scaling``:
- Fprop: x [n, K] along K (1x128), Wᵀ [N, K] as quantized when the layer was built
  (128x128 tiles; the benchmark has no optimizer step, so the copy stays current).
- Dgrad: dy [n, N] along N (1x128), W [K, N] along N: blockwise, the forward's tiles
  transposed (the same e4m3 values: why the recipe tiles weights 128x128); rowwise, the
  bf16 master weight quantized one scale per row of W (a weight's fp8 copy, per step).
- Wgrad: xᵀ [K, n] and dyᵀ [N, n] along an expert's own tokens (1x128 blocks never cross
  experts; rowwise one scale per row of xᵀ / dyᵀ), zero-padded to 128 (blockwise) or 16
  (rowwise) tokens, which adds nothing to the sums; ``_scaled_mm`` takes 1x128 x 1x128.
The forward saves x quantized along its tokens (the column copy Wgrad reads, fp8, as fp8
training keeps activations), not the bf16 x; the gradient of the bf16 master weight is
Wgrad's bf16 output, returned to autograd as a matmul's would be.

What ran: rowwise ``torch._scaled_mm`` on the CPU (torch 2.13), forward and backward.
Blockwise (1x128 x 128x128 in Fprop and Dgrad, 1x128 x 1x128 in Wgrad) and the grouped
Fprop/Dgrad (``torch._scaled_grouped_mm``) are written against ScaledBlas.cpp /
GroupedBlas.cpp and run on the CPU only through renderings that check those layouts
(tests/scaled_mm_cpu.py, tests/test_fp8_training.py); never on a GPU. The grouped path's Wgrad loops
``_scaled_mm`` over the experts (counts on the host, as the loop's are).
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
import torch.nn.functional as F

from runner.fp8 import FP8_BLOCK, quantize_fp8_rowwise
from runner.native import FP8, Operand, fp8_grouped_gemm, gemm, quantize_operand

ROWWISE_ALIGN = 16  # _scaled_mm: the reduction dimension a multiple of 16


def expert_ranges(counts: list[int]) -> list[tuple[int, int, int]]:
    """(expert, first row, end row) of each expert with rows."""
    starts = list(itertools.accumulate(counts, initial=0))
    return [(e, starts[e], starts[e] + n) for e, n in enumerate(counts) if n]


def token_operand(t: torch.Tensor) -> Operand:
    """tᵀ ([cols, n], from t [n, cols]) quantized along t's rows (the tokens), zero-padded
    to the recipe's alignment: Wgrad's operand."""
    align = ROWWISE_ALIGN if FP8.scaling == "rowwise" else FP8_BLOCK
    n = t.shape[0]
    padded = F.pad(t.t(), (0, -n % align)).contiguous()
    return quantize_operand(padded, "fp8")


def transposed_weight(w: torch.Tensor, forward: Operand) -> Operand:
    """W [K, N] along N, Dgrad's operand, from the forward's Wᵀ [N, K] (blockwise: the same
    128x128 tiles transposed, a layout copy) or the bf16 master ``w`` [K, N] (rowwise)."""
    if FP8.scaling == "rowwise":
        return Operand(*quantize_fp8_rowwise(w), None)
    return Operand(forward.data.t().contiguous(), forward.scales.t().contiguous(), None)


class Fp8ExpertLinear(torch.autograd.Function):
    """y = x @ w[e] for each expert's rows: x [n, K] bf16, w [El, K, N] the bf16 master
    weight (a parameter: its gradient is Wgrad's), ``xq`` x quantized along K (Fprop's
    operand), ``weights`` each expert's Wᵀ [N, K] as built, ``grouped`` their stack for
    one ``torch._scaled_grouped_mm`` (rowwise; None: one ``_scaled_mm`` per expert)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, xq: Operand,
                weights: list[Operand], grouped: Operand | None, counts: list[int],
                offs: torch.Tensor) -> torch.Tensor:
        ranges = expert_ranges(counts)
        ctx.ranges, ctx.weights, ctx.offs, ctx.grouped = ranges, weights, offs, grouped
        ctx.rows = x.shape[0]
        columns = [token_operand(x[a:b]) for _, a, b in ranges] if w.requires_grad else []
        ctx.save_for_backward(w, *(t for o in columns for t in (o.data, o.scales)))
        if not ranges:
            return x.new_zeros((x.shape[0], w.shape[-1]))
        if grouped is not None:
            return fp8_grouped_gemm(xq, grouped, offs)
        return torch.cat([gemm(xq.rows(a, b), weights[e], "fp8") for e, a, b in ranges])

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> Any:
        w, *flat = ctx.saved_tensors
        dy = dy.contiguous()  # an expanded gradient (y.sum()) has stride 0
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = _dgrad(ctx, dy, w)
        if ctx.needs_input_grad[1]:
            dw = torch.zeros_like(w)
            for i, (e, a, b) in enumerate(ctx.ranges):
                columns = Operand(flat[2 * i], flat[2 * i + 1], None)
                dw[e] = gemm(columns, token_operand(dy[a:b]), "fp8")  # [K, N]
        return dx, dw, None, None, None, None, None


def _dgrad(ctx: Any, dy: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """dx = dy @ Wᵀ per expert, dy quantized along N once over all rows."""
    if not ctx.ranges:
        return dy.new_zeros((ctx.rows, w.shape[1]))
    dyq = quantize_operand(dy, "fp8")
    if ctx.grouped is not None:  # rowwise: the master weight, one scale per row of W
        wt = Operand(*quantize_fp8_rowwise(w), None)
        return fp8_grouped_gemm(dyq, wt, ctx.offs)
    return torch.cat([gemm(dyq.rows(a, b), transposed_weight(w[e], ctx.weights[e]), "fp8")
                      for e, a, b in ctx.ranges])


def fp8_linear(x: torch.Tensor, w: torch.Tensor, xq: Operand, weights: list[Operand],
               grouped: Operand | None, counts: list[int], offs: torch.Tensor
               ) -> torch.Tensor:
    """``Fp8ExpertLinear`` (see there), typed."""
    y: torch.Tensor = Fp8ExpertLinear.apply(  # type: ignore[no-untyped-call]
        x, w, xq, weights, grouped, counts, offs)
    return y


def fp8_experts_training(x: Operand, rows: torch.Tensor, gate: torch.Tensor,
                         up: torch.Tensor, down: torch.Tensor,
                         weights: list[list[Operand]], grouped: list[Operand] | None,
                         counts: list[int], offs: torch.Tensor) -> torch.Tensor:
    """The SwiGLU experts with every GEMM fp8 (``Fp8ExpertLinear``): ``x`` the rows as
    Fprop takes them, ``rows`` the same in bf16 (their gradient's and Wgrad's source);
    the hidden activation quantized once over all experts' rows, as inference does."""
    g_ops, u_ops, d_ops = weights
    g_grp, u_grp, d_grp = grouped if grouped is not None else (None, None, None)
    h_gate = fp8_linear(rows, gate, x, g_ops, g_grp, counts, offs)
    h_up = fp8_linear(rows, up, x, u_ops, u_grp, counts, offs)
    hidden = F.silu(h_gate) * h_up
    h = quantize_operand(hidden.detach(), "fp8")
    return fp8_linear(hidden, down, h, d_ops, d_grp, counts, offs)
