"""Native fp8 on this device (issue 26.1), one step for bench/gpu_check.sh: each candidate
of the start-up probe (``runner.fp8_probe``) PASS or FAIL with why, then the chosen one's
experts trained natively (forward and backward GEMMs scaled) against bf16's output and
gradients, and its expert GEMMs (gate, up, down of E experts) timed natively against the
same GEMMs in bf16.

Prints PASS/FAIL lines and one JSON line {"scaling", "grouped", "fp8TF", "bf16TF",
"percentOfFp8Peak"}; exits 0 whatever fails (the summary says it). On the CPU (or with
--dry-run) the same steps run on a tiny shape, the candidates for real (torch's CPU has
rowwise ``_scaled_mm`` only), the times by the wall clock and meaningless.

Usage: python bench/fp8_check.py [--dry-run]
"""

from __future__ import annotations

import json
import sys

import torch

from runner.expert_kernels import EXPERT_KERNELS, experts_grouped, experts_loop, experts_native
from runner.experts import ExpertFn, Experts, make_experts, quantize_experts
from runner.fp8_probe import CANDIDATES, first_native, try_candidate
from runner.matrix import Timing
from runner.native import FP8, USAGE
from runner.platform import datasheet_peaks
from runner.timing import time_windows

GPU_SHAPE = (8, 512, 7168, 2048)  # experts, rows per expert, D, F (DeepSeek-V3's widths)
CPU_SHAPE = (2, 128, 256, 256)


def expert_tf(shape: tuple[int, int, int, int], device: torch.device, native: bool) -> float:
    """TFLOP/s of gate, up and down over ``shape``'s experts (one launch per GEMM kind)."""
    el, rows, d, f = shape
    precision = "fp8" if native else "bf16"
    experts = quantize_experts(make_experts(d, f, 0, el, 1, torch.bfloat16, device),
                               precision, native=native)
    x = torch.randn(el * rows, d, device=device).to(torch.bfloat16)
    counts = [rows] * el
    offs = torch.tensor(counts, device=device).cumsum(0).to(torch.int32)
    emulated = experts_grouped if device.type == "cuda" else experts_loop
    fn = experts_native(emulated) if native else emulated
    timing = Timing(windows=3, iterations=5, warmup=2)
    with torch.no_grad():
        ms = time_windows(lambda: fn(x, experts, counts, offs, precision, False, None), timing,
                          device=device, group=None).median_ms
    return 6 * el * rows * d * f / (ms * 1e-3) / 1e12


def training_line(shape: tuple[int, int, int, int], device: torch.device) -> str:
    """PASS/FAIL: the chosen recipe's experts forward and backward with every GEMM scaled
    (runner.fp8_autograd: Fprop, Dgrad, Wgrad), counted native, and the output and each
    gradient within fp8's error (< 0.1 relative) of the same experts in bf16."""
    el, rows, d, f = shape
    built = make_experts(d, f, 0, el, 1, torch.bfloat16, device)
    x = torch.randn(el * rows, d, device=device).to(torch.bfloat16)
    dy = torch.randn(el * rows, d, device=device).to(torch.bfloat16)
    counts = [rows] * el
    offs = torch.tensor(counts, device=device).cumsum(0).to(torch.int32)

    def outputs(fn: ExpertFn, experts: Experts, precision: str) -> list[torch.Tensor]:
        leaves = [t.detach().clone().requires_grad_(True) for t in (x, *experts.parameters())]
        y = fn(leaves[0], experts.with_parameters(*leaves[1:]), counts, offs, precision,
               False, None)
        y.backward(dy)
        return [y.detach(), *(t.grad for t in leaves if t.grad is not None)]

    USAGE.reset()
    EXPERT_KERNELS.reset()
    got = outputs(experts_native(experts_loop), quantize_experts(built, "fp8", native=True),
                  "fp8")
    kernel, native = EXPERT_KERNELS.kernel, USAGE.all_native
    want = outputs(experts_loop, built, "bf16")
    errors = [float((g.float() - w.float()).norm() / w.float().norm())
              for g, w in zip(got, want, strict=True)]
    ok = native and len(errors) == 5 and max(errors) < 0.1
    return (f"{'PASS' if ok else 'FAIL'} fp8 native training ({kernel}, native {native}): "
            f"output, dx, dgate, dup, ddown vs bf16 " + " ".join(f"{e:.3g}" for e in errors))


def main(argv: list[str]) -> int:
    cuda = torch.cuda.is_available() and "--dry-run" not in argv
    device = torch.device("cuda" if cuda else "cpu")
    for scaling, grouped in CANDIDATES:
        why = try_candidate(device, scaling, grouped)
        kernel = "_scaled_grouped_mm" if grouped else "_scaled_mm"
        print(f"{'PASS' if why is None else 'FAIL'} fp8 candidate {scaling} {kernel}"
              + ("" if why is None else f": {why}"))
    found = first_native(device)
    if not found.native:
        print(f"FAIL fp8 native: {found.reason}")
        return 0
    shape = GPU_SHAPE if cuda else CPU_SHAPE
    try:
        print(training_line(shape, device))
    except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
        print(f"FAIL fp8 native training: {type(exc).__name__}: {str(exc)[:300]}")
    try:
        fp8, bf16 = expert_tf(shape, device, True), expert_tf(shape, device, False)
    except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
        print(f"FAIL fp8 native experts: {type(exc).__name__}: {str(exc)[:300]}")
        return 0
    peaks = datasheet_peaks(torch.cuda.get_device_name(device)) if cuda else None
    peak = peaks.tf.get("fp8") if peaks else None
    percent = fp8 / peak * 100 if peak else None
    ok = percent is None or 0 < percent <= 100
    print(f"{'PASS' if ok else 'FAIL'} fp8 native ({FP8.scaling}, "
          f"{'grouped' if FP8.grouped else 'per expert'}): {fp8:.4g} TF/s vs bf16 {bf16:.4g}"
          + (f", {percent:.1f} % of the fp8 peak" if percent is not None else ""))
    print(json.dumps({"scaling": found.scaling, "grouped": found.grouped, "fp8TF": fp8,
                      "bf16TF": bf16, "percentOfFp8Peak": percent}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
