"""The start-up probe of native fp8: which of torch's scaled GEMMs run here, in order of
preference, each against the emulated GEMM of the same quantized operands.

ScaledBlas.cpp / GroupedBlas.cpp (torch 2.9-2.13): ``torch._scaled_mm`` with 1x128
activation and 128x128 weight scales (DeepSeek-V3's recipe) is cuBLAS on sm_90 only;
rowwise ``torch._scaled_mm`` runs on sm_89+ (CUTLASS on sm_100); the rowwise
``torch._scaled_grouped_mm`` is CUTLASS on sm_90 and sm_100. So an H200 runs the
blockwise recipe expert by expert, a B200 the rowwise one in one grouped GEMM. What was
tried and why it failed is kept (``Fp8Probe.reason``) for the report.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runner.native import FP8, fp8_grouped_gemm, quantize_operand, scaled_gemm, stack_operands
from runner.quant import fake_quantize, fake_quantize_weight

# (scaling, grouped) in order of preference
CANDIDATES = (("blockwise", False), ("rowwise", True), ("rowwise", False))
SPLIT = 5  # the first expert's rows of 256: groups of 5 and 251
PROBE_ERRORS = (RuntimeError, TypeError, AttributeError, NotImplementedError, ValueError)


@dataclass(frozen=True)
class Fp8Probe:
    scaling: str | None  # None: fp8 runs emulated (blockwise recipe)
    grouped: bool
    reason: str | None  # the candidates that failed before the one chosen (or all)

    @property
    def native(self) -> bool:
        return self.scaling is not None


def probe_fp8(device: torch.device) -> Fp8Probe:
    """Sets ``runner.native.FP8`` to the first candidate that runs and agrees; on the CPU
    fp8 emulates (the CPU's rowwise ``_scaled_mm`` says nothing about a GPU's)."""
    if device.type != "cuda":
        FP8.scaling, FP8.grouped = "blockwise", False
        return Fp8Probe(None, False, "no CUDA device: fp8 runs emulated (blockwise recipe)")
    return first_native(device)


def first_native(device: torch.device) -> Fp8Probe:
    """The candidates in order; the first that runs is kept, the failures before it said."""
    failures: list[str] = []
    for scaling, grouped in CANDIDATES:
        failure = try_candidate(device, scaling, grouped)
        if failure is None:
            return Fp8Probe(scaling, grouped, "; ".join(failures) or None)
        failures.append(f"{_name(scaling, grouped)}: {failure}")
    FP8.scaling, FP8.grouped = "blockwise", False
    return Fp8Probe(None, False, "; ".join(failures)[:1000])


def _name(scaling: str, grouped: bool) -> str:
    return f"{scaling} torch._scaled_{'grouped_mm' if grouped else 'mm'}"


def try_candidate(device: torch.device, scaling: str, grouped: bool) -> str | None:
    """With ``runner.native.FP8`` set to the candidate: None when its GEMM runs and matches
    the emulation within 1 %, else why not. Two experts of unaligned row counts, as the
    standard pipeline sends them."""
    FP8.scaling, FP8.grouped = scaling, grouped
    try:
        g = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(256, 256, generator=g, device=device).to(torch.bfloat16)
        w = torch.randn(2, 256, 128, generator=g, device=device).to(torch.bfloat16)
        if grouped:
            offs = torch.tensor([SPLIT, 256], dtype=torch.int32, device=device)
            wq = stack_operands([quantize_operand(m.t().contiguous(), "fp8", weight=True)
                                 for m in w.unbind(0)])
            got = fp8_grouped_gemm(quantize_operand(x, "fp8"), wq, offs)
        else:
            got = torch.cat([scaled_gemm(x[:SPLIT], w[0], "fp8"),
                             scaled_gemm(x[SPLIT:], w[1], "fp8")])
        want = _emulated(x, w, scaling)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        error = float((got.float() - want).norm() / want.norm())
        return None if error < 1e-2 else f"disagreed with the emulation ({error:.2g})"
    except PROBE_ERRORS as exc:
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def _emulated(x: torch.Tensor, w: torch.Tensor, scaling: str) -> torch.Tensor:
    """The same product on the recipe's grid in float32 (rowwise: one scale a row)."""
    if scaling == "rowwise":
        xq = quantize_operand(x, "fp8")
        xs = xq.data.view(torch.float8_e4m3fn).float() * xq.scales
        ws = [quantize_operand(m.t().contiguous(), "fp8", weight=True) for m in w.unbind(0)]
        wf = [(o.data.view(torch.float8_e4m3fn).float() * o.scales).t() for o in ws]
    else:
        xs = fake_quantize(x, "fp8").float()
        wf = [fake_quantize_weight(m.t().contiguous(), "fp8").float().t() for m in w.unbind(0)]
    return torch.cat([xs[:SPLIT] @ wf[0], xs[SPLIT:] @ wf[1]])
