"""The expert kernels, each one ``ExpertFn``: a loop of matmuls, ``torch._grouped_mm``
(both on the emulated grid) and native scaled GEMMs; ``EXPERT_KERNELS`` names the ones a
case ran."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from runner.experts import ExpertFn, Experts, expert_weights, native_operands, rows_on_grid
from runner.fp8_autograd import expert_ranges, fp8_experts_training
from runner.native import (
    FP8,
    USAGE,
    Operand,
    fp8_grouped_gemm,
    gemm,
    quantize_operand,
    stack_operands,
)
from runner.quant import fake_quantize


@dataclass
class KernelUsage:
    """Which expert kernels ran since the last ``reset`` (a case's timed passes), so a
    case names the kernel its times come from. Not recorded while torch.compile traces
    (a compiled call runs no Python): mega records through ``recording``."""

    names: set[str] = field(default_factory=set)
    scalings: set[str] = field(default_factory=set)  # fp8's recipes (runner.native)

    def reset(self) -> None:
        self.names.clear()
        self.scalings.clear()

    def record_scaling(self, precision: str, scaling: str) -> None:
        if precision == "fp8" and not torch.compiler.is_compiling():
            self.scalings.add(scaling)

    @property
    def scaling(self) -> str | None:
        """fp8's scaling recipe(s) the expert GEMMs used, "+"-joined; None if no fp8 ran."""
        return "+".join(sorted(self.scalings)) or None

    def record(self, name: str) -> None:
        if not torch.compiler.is_compiling():
            self.names.add(name)

    @property
    def kernel(self) -> str | None:
        """"grouped_mm", "loop", "scaled_mm_loop", several joined by "+", None if none ran."""
        return "+".join(sorted(self.names)) or None


EXPERT_KERNELS = KernelUsage()


def experts_loop(rows: torch.Tensor, experts: Experts, counts: list[int], offs: torch.Tensor,
                 precision: str, on_grid: bool = False, wire: Operand | None = None
                 ) -> torch.Tensor:
    """Expert by expert: the fallback where ``torch._grouped_mm`` does not run."""
    EXPERT_KERNELS.record("loop")
    EXPERT_KERNELS.record_scaling(precision, "blockwise")
    gate, up, down = expert_weights(experts, precision)
    x = rows_on_grid(rows, precision, on_grid)
    if not counts:
        return rows.new_zeros((0, experts.down.shape[-1]))
    starts = list(itertools.accumulate(counts, initial=0))
    hidden = torch.cat([F.silu(x[a:b] @ gate[e]) * (x[a:b] @ up[e])
                        for e, (a, b) in enumerate(itertools.pairwise(starts))])
    # The hidden activation quantized once over all experts' rows (nvfp4: one tensor
    # scale), as the grouped and the native GEMMs do.
    h = fake_quantize(hidden, precision)
    return torch.cat([h[a:b] @ down[e] for e, (a, b) in enumerate(itertools.pairwise(starts))])


def experts_grouped(rows: torch.Tensor, experts: Experts, counts: list[int],
                    offs: torch.Tensor, precision: str, on_grid: bool = False,
                    wire: Operand | None = None) -> torch.Tensor:
    """All experts in one ``torch._grouped_mm`` per GEMM (gate, up, down); ``offs``: the
    int32 end row of each expert's group (empty groups repeat the previous end)."""
    EXPERT_KERNELS.record("grouped_mm")
    EXPERT_KERNELS.record_scaling(precision, "blockwise")
    gate, up, down = expert_weights(experts, precision)
    x = rows_on_grid(rows, precision, on_grid)
    h = F.silu(torch._grouped_mm(x, gate, offs=offs)) * torch._grouped_mm(x, up, offs=offs)
    y: torch.Tensor = DenseGrad.apply(
        torch._grouped_mm(fake_quantize(h, precision), down, offs=offs))
    return y


class DenseGrad(torch.autograd.Function):
    """Identity whose backward makes the incoming gradient dense: ``_grouped_mm``'s
    backward rejects stride-0 gradients ("Invalid strides/sizes, got [0, 0]"), which is
    what ``y.sum().backward()`` sends (an expanded scalar)."""

    @staticmethod
    def forward(ctx: Any, y: torch.Tensor) -> torch.Tensor:
        return y.view_as(y)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad.contiguous()


EMULATED_KERNELS: dict[ExpertFn, str] = {experts_loop: "loop", experts_grouped: "grouped_mm"}


def recording(fn: ExpertFn, compiled: ExpertFn) -> ExpertFn:
    """``compiled`` (torch.compile of ``fn``, which runs no Python when called) recording
    ``fn``'s kernel (and fp8's emulated recipe) in ``EXPERT_KERNELS`` at each call."""
    name = EMULATED_KERNELS[fn]

    def run(*args: Any) -> torch.Tensor:
        EXPERT_KERNELS.record(name)
        EXPERT_KERNELS.record_scaling(args[4], "blockwise")  # ExpertFn's precision
        return compiled(*args)

    return run


def experts_native(fallback: ExpertFn) -> ExpertFn:
    """Native scaled GEMMs (``runner.native``): inference, and fp8 training (every GEMM,
    forward and backward, ``runner.fp8_autograd``); ``fallback`` (emulated) for mxfp8/nvfp4
    with gradients. Counted in ``USAGE``. The weights come quantized from the
    build; the rows as the wire delivered them (``wire``) or else quantized once over all
    experts' rows (one tensor scale, as the emulation does), and the hidden activation
    quantized once over all experts' rows. fp8 under the rowwise recipe with the grouped
    kernel: one ``torch._scaled_grouped_mm`` per GEMM; else one ``_scaled_mm`` per expert."""
    def run(rows: torch.Tensor, experts: Experts, counts: list[int], offs: torch.Tensor,
            precision: str, on_grid: bool = False, wire: Operand | None = None
            ) -> torch.Tensor:
        if precision == "bf16":
            return fallback(rows, experts, counts, offs, precision, on_grid, None)
        training = torch.is_grad_enabled()
        if training and precision != "fp8":  # no mxfp8/nvfp4 scaled-GEMM backward
            USAGE.emulated += 1
            return fallback(rows, experts, counts, offs, precision, on_grid, None)
        USAGE.native += 1
        EXPERT_KERNELS.record_scaling(precision, FP8.scaling)
        x = wire if wire is not None else quantize_operand(rows.detach(), precision)
        if training:
            return _native_training(x, rows, experts, counts, offs)
        if precision == "fp8" and FP8.grouped:
            EXPERT_KERNELS.record("scaled_grouped_mm")
            return _native_grouped(x, rows, experts, offs)
        EXPERT_KERNELS.record("scaled_mm_loop")
        if rows.shape[0] == 0:
            return rows.new_zeros((0, experts.down.shape[-1]))
        return _native_loop(x, experts, counts, precision)

    return run


def _native_training(x: Operand, rows: torch.Tensor, experts: Experts, counts: list[int],
                     offs: torch.Tensor) -> torch.Tensor:
    """fp8 with gradients: Fprop, Dgrad and Wgrad scaled (``runner.fp8_autograd``), the
    gradients reaching the bf16 master weights."""
    q = experts.quantized
    grouped = None
    if FP8.grouped:
        EXPERT_KERNELS.record("scaled_grouped_mm")
        grouped = (q.grouped if q is not None and q.grouped is not None else
                   [stack_operands(o) for o in _native_operands(experts, "fp8")])
    else:
        EXPERT_KERNELS.record("scaled_mm_loop")
    return fp8_experts_training(x, rows, experts.gate, experts.up, experts.down,
                                _native_operands(experts, "fp8"), grouped, counts, offs)


def _native_operands(experts: Experts, precision: str) -> list[list[Operand]]:
    q = experts.quantized
    if q is not None and q.precision == precision and q.native is not None:
        return q.native
    return [native_operands(w, precision) for w in experts.parameters()]


def _native_loop(x: Operand, experts: Experts, counts: list[int], precision: str
                 ) -> torch.Tensor:
    gate, up, down = _native_operands(experts, precision)
    ranges = expert_ranges(counts)
    hidden = torch.cat([F.silu(gemm(x.rows(a, b), gate[e], precision))
                        * gemm(x.rows(a, b), up[e], precision) for e, a, b in ranges])
    h = quantize_operand(hidden, precision)
    return torch.cat([gemm(h.rows(a, b), down[e], precision) for e, a, b in ranges])


def _native_grouped(x: Operand, rows: torch.Tensor, experts: Experts, offs: torch.Tensor
                    ) -> torch.Tensor:
    """fp8 rowwise through ``torch._scaled_grouped_mm`` (no host copy of the counts)."""
    q = experts.quantized
    gate, up, down = (q.grouped if q is not None and q.grouped is not None else
                      [stack_operands(o) for o in _native_operands(experts, "fp8")])
    if rows.shape[0] == 0:
        return rows.new_zeros((0, experts.down.shape[-1]))
    hidden = F.silu(fp8_grouped_gemm(x, gate, offs)) * fp8_grouped_gemm(x, up, offs)
    return fp8_grouped_gemm(quantize_operand(hidden, "fp8"), down, offs)
