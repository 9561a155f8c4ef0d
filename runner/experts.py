"""This rank's experts: their weights (drawn from the seed, quantized once for a
precision) and the weights a GEMM takes on the precision's grid."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from runner.native import FP8, Operand, quantize_operand, stack_operands
from runner.quant import fake_quantize, fake_quantize_weight


@dataclass(frozen=True)
class QuantizedWeights:
    """The experts' weights on a precision's grid, made once when the layer is built, so
    that a timed step quantizes only its activations. Each expert's matrix is its own
    tensor (its own nvfp4 tensor scale), in the emulated and the native form alike."""

    precision: str
    emulated: list[torch.Tensor]  # gate, up, down dequantized: [El, in, out], bf16
    native: list[list[Operand]] | None  # gate, up, down: per expert, [out, in] along in
    # gate, up, down: all experts stacked, for fp8's torch._scaled_grouped_mm (rowwise)
    grouped: list[Operand] | None = None


@dataclass
class Experts:
    """This rank's El SwiGLU experts: gate and up D->F, down F->D."""

    gate: torch.Tensor  # [El, D, F]
    up: torch.Tensor  # [El, D, F]
    down: torch.Tensor  # [El, F, D]
    quantized: QuantizedWeights | None = None  # see quantize_experts

    def parameters(self) -> list[torch.Tensor]:
        return [self.gate, self.up, self.down]

    def with_parameters(self, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor
                        ) -> Experts:
        """Other tensors of the same values (detached, copied), the quantized form kept."""
        return Experts(gate, up, down, self.quantized)


def make_experts(shape_d: int, f: int, first_expert: int, count: int, seed: int,
                 dtype: torch.dtype, device: torch.device) -> Experts:
    """Weights drawn per global expert from the seed, so any rank can rebuild any expert.
    Drawn on ``device`` by its own generator (a large case's ~10^9 numbers took the host
    minutes), one expert's float32 draw at a time, so the transient is one expert's."""
    tensors = []
    for which, (rows, cols) in enumerate([(shape_d, f), (shape_d, f), (f, shape_d)]):
        out = torch.empty((count, rows, cols), dtype=dtype, device=device)
        for e in range(count):
            g = torch.Generator(device=device).manual_seed(
                seed * 7919 + (first_expert + e) * 3 + which + 1)
            out[e] = torch.randn(rows, cols, generator=g, device=device).mul_(rows ** -0.5)
        tensors.append(out)
    gate, up, down = tensors
    return Experts(gate, up, down)


def quantize_experts(experts: Experts, precision: str, native: bool) -> Experts:
    """``experts`` with their weights quantized once for ``precision`` (``native``: also
    as ``torch._scaled_mm`` operands); bf16 needs nothing."""
    if precision == "bf16":
        return experts
    with torch.no_grad():
        params = [w.detach() for w in experts.parameters()]
        emulated = [_on_grid(w, precision) for w in params]
        operands = [native_operands(w, precision) for w in params] if native else None
        grouped = ([stack_operands(o) for o in operands]
                   if operands and precision == "fp8" and FP8.grouped else None)
    return Experts(experts.gate, experts.up, experts.down,
                   QuantizedWeights(precision, emulated, operands, grouped))


def _on_grid(w: torch.Tensor, precision: str) -> torch.Tensor:
    """[El, in, out] on the grid, each expert its own tensor; blocks along ``in`` (the
    GEMM's reduction dimension)."""
    return torch.stack([fake_quantize_weight(m.t(), precision).t() for m in w.unbind(0)])


def native_operands(w: torch.Tensor, precision: str) -> list[Operand]:
    return [quantize_operand(m.t().contiguous(), precision, weight=True) for m in w.unbind(0)]


class StraightThrough(torch.autograd.Function):
    """Forward: the weight as quantized when the layer was built; backward: the gradient
    goes to the weight unchanged (the straight-through estimator of ``fake_quantize``)."""

    @staticmethod
    def forward(ctx: Any, weight: torch.Tensor, quantized: torch.Tensor) -> torch.Tensor:
        return quantized.view_as(quantized)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        return grad, None


def expert_weights(experts: Experts, precision: str) -> list[torch.Tensor]:
    """gate, up, down on the precision's grid: the ones made when the layer was built, or
    (experts built without them, e.g. in tests) quantized now, by the same recipe."""
    if precision == "bf16":
        return experts.parameters()
    q = experts.quantized
    if q is None or q.precision != precision:
        return [_on_grid(w, precision) for w in experts.parameters()]
    return [StraightThrough.apply(w, wq) if w.requires_grad else wq
            for w, wq in zip(experts.parameters(), q.emulated, strict=True)]


# (rows, experts, rows per expert, cumulative offsets, precision, rows already on the
# precision's grid: a quantized dispatch delivered them so, and they are not rounded again;
# the same rows as the wire delivered them, a native GEMM's operand: see dispatch_wire)
ExpertFn = Callable[[torch.Tensor, Experts, list[int], torch.Tensor, str, bool,
                     Operand | None], torch.Tensor]


def rows_on_grid(rows: torch.Tensor, precision: str, on_grid: bool) -> torch.Tensor:
    return rows if on_grid else fake_quantize(rows, precision)
