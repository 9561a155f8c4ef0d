"""The GEMM ceilings of ``runner.ceilings``: a dense n x n x n GEMM per native precision,
and the experts' GEMMs at each case's busiest rank, as its pipeline and kernel run them
(see ``runner.ceilings`` for what each figure means)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from runner.fp8_autograd import fp8_linear
from runner.layer import GROUP_ROWS
from runner.matrix import Matrix, Timing
from runner.native import fp8_grouped_gemm, gemm, quantize_operand, stack_operands
from runner.pipelines import gemm_layout
from runner.platform import Platform
from runner.routing import build_plan
from runner.spec import CaseSpec
from runner.timing import time_windows

DENSE_N = {"cuda": 8192, "cpu": 256}
TRAINING_GEMMS = 3  # forward, input gradient, weight gradient


@dataclass(frozen=True)
class GroupedShape:
    precision: str
    experts: int  # local experts of a rank
    rows: int  # rows per expert: the busiest rank's, rounded up (the ceiling's key)
    D: int
    F: int
    pipeline: str
    busiest: int  # rows the busiest rank receives
    gemm_experts: int  # experts with rows in one grouped GEMM
    gemm_rows: int  # rows per such expert, as the pipeline runs them (padded)
    stages: int  # grouped GEMMs per layer pass
    training: bool = False  # forward and backward GEMMs

    @property
    def passes(self) -> int:
        return TRAINING_GEMMS if self.training else 1

    @property
    def flops(self) -> int:
        """The useful FLOPs of the busiest rank's experts: its rows, unpadded."""
        return 6 * self.busiest * self.D * self.F * self.passes

    @property
    def gemm_flops(self) -> int:
        """The FLOPs its GEMMs run, padding included."""
        return (6 * self.gemm_experts * self.gemm_rows * self.stages * self.D * self.F
                * self.passes)


def gemm_rows(busiest: int, experts: int, pipeline: str, tokens: int) -> tuple[int, int, int]:
    """(experts with rows, rows per such expert, GEMMs per pass) of a rank receiving
    ``busiest`` rows for ``experts`` experts, the rows spread evenly: over the pipeline's
    token stages, then over as many experts as a stage has rows for (an expert without
    rows is an empty group, no padding), each expert's padded to GROUP_ROWS where the
    pipeline pads."""
    padded, stages = gemm_layout(pipeline, tokens)
    per_stage = -(-busiest // stages)
    active = min(experts, per_stage)
    per_expert = -(-per_stage // active)
    return active, (-(-per_expert // GROUP_ROWS) * GROUP_ROWS if padded else per_expert), \
        stages


def grouped_shapes(matrix: Matrix, cases: list[CaseSpec]) -> list[GroupedShape]:
    """The distinct expert-GEMM shapes of ``cases``, in order (a shape with no rows has
    no throughput to measure)."""
    shapes: dict[GroupedShape, None] = {}
    for spec in cases:
        local = matrix.shape.E // spec.ep
        busiest = max(build_plan(matrix.shape, spec, matrix.seed).receive)
        if busiest:
            active, per_gemm, stages = gemm_rows(busiest, local, spec.pipeline,
                                                 matrix.shape.T)
            shapes[GroupedShape(spec.precision, local, -(-busiest // local), matrix.shape.D,
                                spec.F, spec.pipeline, busiest, active, per_gemm,
                                stages, spec.training)] = None
    return list(shapes)



def _seconds(run: Callable[[], object], timing: Timing, device: torch.device) -> float:
    ms = time_windows(run, timing, device=device, group=None).median_ms
    return ms / 1e3


def randn(*shape: int, device: torch.device) -> torch.Tensor:
    return torch.randn(*shape, device=device).to(torch.bfloat16)


def dense_tf(precision: str, n: int, timing: Timing, device: torch.device) -> float:
    a, b = randn(n, n, device=device), randn(n, n, device=device)
    if precision == "bf16":
        def run() -> object:
            return a @ b
    else:  # operands quantized once, outside the timed GEMM
        qa, qb = quantize_operand(a, precision), quantize_operand(b, precision, weight=True)

        def run() -> object:
            return gemm(qa, qb, precision)
    return 2 * n**3 / _seconds(run, timing, device) / 1e12


def grouped_kernel(shape: GroupedShape, plat: Platform) -> tuple[str, bool]:
    """(the kernel a case of this shape runs its expert GEMMs with, emulated?)"""
    # fp8 trains natively (runner.fp8_autograd); mxfp8 / nvfp4 training emulates
    if shape.precision != "bf16" and plat.native_scaled.get(shape.precision) \
            and (not shape.training or shape.precision == "fp8"):
        if shape.precision == "fp8" and plat.fp8 is not None and plat.fp8.grouped:
            return "torch._scaled_grouped_mm", False
        return "torch._scaled_mm per expert", False
    kernel = "torch._grouped_mm" if plat.grouped_mm else "torch.matmul per expert"
    return kernel, shape.precision != "bf16"


def grouped_seconds(shape: GroupedShape, kernel: str, timing: Timing, device: torch.device
                    ) -> float:
    """One set of the experts' GEMMs (gate, up, down, each its own weight; training: and
    their gradients) of ``shape.gemm_experts`` experts at ``shape.gemm_rows`` rows each."""
    el, rows, d, f = shape.gemm_experts, shape.gemm_rows, shape.D, shape.F
    x, h = randn(el * rows, d, device=device), randn(el * rows, f, device=device)
    gate, up = randn(el, d, f, device=device), randn(el, d, f, device=device)
    down = randn(el, f, d, device=device)
    offs = torch.arange(1, el + 1, device=device, dtype=torch.int32) * rows
    if kernel.startswith("torch._scaled") and shape.training:
        run = fp8_training_set(kernel, (x, h), (gate, up, down), offs)
    elif kernel.startswith("torch._scaled"):
        run = _native_set(shape.precision, kernel, (x, h), (gate, up, down), offs)
    else:
        def gemm_set(x: torch.Tensor, h: torch.Tensor, gate: torch.Tensor, up: torch.Tensor,
                     down: torch.Tensor) -> list[torch.Tensor]:
            return bf16_gemm_set(kernel, x, h, (gate, up, down), offs)
        run = with_backward(gemm_set, [x, h, gate, up, down]) if shape.training else \
            partial(gemm_set, x, h, gate, up, down)
    return _seconds(run, timing, device)


def bf16_gemm_set(kernel: str, x: torch.Tensor, h: torch.Tensor,
              weights: tuple[torch.Tensor, torch.Tensor, torch.Tensor], offs: torch.Tensor
              ) -> list[torch.Tensor]:
    gate, up, down = weights
    if kernel == "torch._grouped_mm":
        return [torch._grouped_mm(x, gate, offs=offs), torch._grouped_mm(x, up, offs=offs),
                torch._grouped_mm(h, down, offs=offs)]
    rows = x.shape[0] // gate.shape[0]
    out = []
    for e in range(gate.shape[0]):
        xe, he = x[e * rows:(e + 1) * rows], h[e * rows:(e + 1) * rows]
        out += [xe @ gate[e], xe @ up[e], he @ down[e]]
    return out


def with_backward(gemm_set: Callable[..., list[torch.Tensor]], inputs: list[torch.Tensor]
                   ) -> Callable[[], object]:
    """The forward GEMMs and, through autograd, each one's input and weight gradient."""
    leaves = [t.requires_grad_(True) for t in inputs]
    with torch.no_grad():  # the output gradients made once, outside the timed GEMMs
        grads = [torch.ones_like(o) for o in gemm_set(*leaves)]

    def run() -> object:
        return torch.autograd.grad(gemm_set(*leaves), leaves, grads)

    return run


def _native_set(precision: str, kernel: str, acts: tuple[torch.Tensor, torch.Tensor],
                weights: tuple[torch.Tensor, ...], offs: torch.Tensor) -> Callable[[], object]:
    """Operands quantized once, outside the timed GEMMs ([out, in] weights along in)."""
    x, h = (quantize_operand(a, precision) for a in acts)
    per_expert = [[quantize_operand(m.t().contiguous(), precision, weight=True)
                   for m in w.unbind(0)] for w in weights]
    if kernel == "torch._scaled_grouped_mm":
        gate, up, down = (stack_operands(o) for o in per_expert)

        def grouped() -> object:
            return (fp8_grouped_gemm(x, gate, offs), fp8_grouped_gemm(x, up, offs),
                    fp8_grouped_gemm(h, down, offs))
        return grouped
    rows = x.data.shape[0] // len(per_expert[0])

    def loop() -> object:
        for e, (g, u, dn) in enumerate(zip(*per_expert, strict=True)):
            a, b = e * rows, (e + 1) * rows
            gemm(x.rows(a, b), g, precision), gemm(x.rows(a, b), u, precision)
            gemm(h.rows(a, b), dn, precision)
        return None
    return loop


def fp8_training_set(kernel: str, acts: tuple[torch.Tensor, torch.Tensor],
                      weights: tuple[torch.Tensor, ...], offs: torch.Tensor
                      ) -> Callable[[], object]:
    """fp8's three scaled GEMMs per linear (Fprop, Dgrad, Wgrad: runner.fp8_autograd),
    the weights quantized once outside, the activations and output gradients inside."""
    per_expert = [[quantize_operand(m.t().contiguous(), "fp8", weight=True)
                   for m in w.unbind(0)] for w in weights]
    grouped = ([stack_operands(o) for o in per_expert]
               if kernel == "torch._scaled_grouped_mm" else [None] * len(per_expert))
    rows = acts[0].shape[0] // len(per_expert[0])
    counts = [rows] * len(per_expert[0])
    leaves = [t.requires_grad_(True) for t in (*acts, *weights)]
    inputs = (leaves[0], leaves[0], leaves[1])  # gate and up take x, down h

    def forward() -> list[torch.Tensor]:
        return [fp8_linear(a, w, quantize_operand(a.detach(), "fp8"), ops, grp, counts,
                           offs)
                for a, w, ops, grp in zip(inputs, leaves[2:], per_expert, grouped,
                                          strict=True)]

    with torch.no_grad():  # the output gradients made once, outside the timed GEMMs
        grads = [torch.ones_like(o) for o in forward()]

    def run() -> object:
        return torch.autograd.grad(forward(), leaves, grads)

    return run
