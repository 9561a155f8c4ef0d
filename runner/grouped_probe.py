"""The start-up probe of ``torch._grouped_mm``: whether the grouped expert kernel runs
here, and why not when it does not."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GroupedProbe:
    runs: bool
    reason: str | None  # why the experts loop instead, when it does not run


# GroupedBlas.cpp (torch 2.8-2.13): _grouped_mm's CUDA kernel (CUTLASS, no host sync) runs
# for bf16 on compute capability 9.x and 10.x only; elsewhere it falls back to a loop over
# the groups after copying the offsets to the host, which no CUDA graph can capture.
GROUPED_MM_CAPABILITIES = (9, 10)


def grouped_mm_probe(device: torch.device) -> GroupedProbe:
    """Whether ``experts_grouped`` runs here: forward and backward on a tiny bf16 problem
    with an empty expert and groups of unaligned sizes (the unpadded pipelines send any
    count; the backward's weight gradient groups along them), against a matmul per expert."""
    if not hasattr(torch, "_grouped_mm"):
        return GroupedProbe(False, f"torch {torch.__version__} has no torch._grouped_mm "
                                   f"(added in 2.8)")
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if major not in GROUPED_MM_CAPABILITIES:
            return GroupedProbe(False, (
                f"sm_{major}{minor}: torch._grouped_mm's grouped kernel runs on sm_90 and "
                f"sm_100 only; elsewhere it loops over the groups after a device-to-host "
                f"copy of the offsets (no CUDA graph can capture it)"))
    try:
        g = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(48, 32, generator=g, device=device).to(torch.bfloat16)
        w = torch.randn(3, 32, 16, generator=g, device=device).to(torch.bfloat16)
        x.requires_grad_(True)
        w.requires_grad_(True)
        counts = [5, 0, 43]  # unaligned groups, as the standard pipeline sends them
        offs = torch.tensor(counts, device=device).cumsum(0).to(torch.int32)
        y = torch._grouped_mm(x, w, offs=offs)
        grad = torch.randn(y.shape, generator=g, device=device).to(torch.bfloat16)
        y.backward(grad)
        xs, gs = x.detach().float().split(counts), grad.float().split(counts)
        want_y = torch.cat([a @ w[e].detach().float() for e, a in enumerate(xs)])
        want_dx = torch.cat([b @ w[e].detach().float().t() for e, b in enumerate(gs)])
        want_dw = torch.stack([a.t() @ b for a, b in zip(xs, gs, strict=True)])
        assert x.grad is not None and w.grad is not None
        wrong = [name for name, got, want in (("output", y, want_y), ("input gradient",
                                              x.grad, want_dx), ("weight gradient",
                                              w.grad, want_dw))
                 if not torch.allclose(got.float(), want, rtol=2e-2, atol=5e-2)]
        if wrong:
            return GroupedProbe(False, f"torch._grouped_mm's {', '.join(wrong)} disagreed "
                                       f"with a matmul per expert")
        return GroupedProbe(True, None)
    except (RuntimeError, AttributeError, NotImplementedError, TypeError, ValueError) as exc:
        return GroupedProbe(False, f"torch._grouped_mm failed: {type(exc).__name__}: "
                                   f"{str(exc)[:300]}")


def grouped_mm_runs(device: torch.device) -> bool:
    return grouped_mm_probe(device).runs
