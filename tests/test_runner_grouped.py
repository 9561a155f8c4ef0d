"""The grouped expert GEMMs (``experts_grouped``) on the CPU, and the start-up probe that
decides whether they run: forward, backward, zero rows, empty experts, each against a
matmul per expert written here, and against ``experts_loop``'s numbers."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from runner import expert_kernels, grouped_probe
from runner.expert_kernels import EXPERT_KERNELS, experts_grouped, experts_loop
from runner.experts import Experts, make_experts
from runner.grouped_probe import grouped_mm_probe

CPU = torch.device("cpu")
D, FF = 32, 64  # multiples of 32 (the mxfp8 block), as _grouped_mm wants 16


def _offs(counts: list[int]) -> torch.Tensor:
    return torch.tensor(counts).cumsum(0).to(torch.int32)


def _experts(count: int, dtype: torch.dtype = torch.bfloat16) -> Experts:
    return make_experts(D, FF, 0, count, 5, dtype, CPU)


def _per_expert(rows: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor,
                counts: list[int]) -> torch.Tensor:
    """SwiGLU per expert in float32, one matmul each: the independent arithmetic."""
    outs, start = [], 0
    for e, n in enumerate(counts):
        x = rows[start:start + n].float()
        h = F.silu(x @ gate[e].float()) * (x @ up[e].float())
        outs.append(h @ down[e].float())
        start += n
    return torch.cat(outs)


def _rows(n: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, D, generator=g).to(torch.bfloat16)


def _close(got: torch.Tensor, want: torch.Tensor, rel: float = 2e-2) -> None:
    error = ((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-12)).item()
    assert error < rel, error


@pytest.mark.parametrize("counts", [[5, 0, 11, 16], [0, 0, 32, 0], [1, 1, 1, 1]])
def test_forward_matches_a_matmul_per_expert(counts: list[int]) -> None:
    experts = _experts(len(counts))
    rows = _rows(sum(counts))
    got = experts_grouped(rows, experts, counts, _offs(counts), "bf16")
    assert got.shape == (sum(counts), D) and got.dtype == torch.bfloat16
    _close(got, _per_expert(rows, experts.gate, experts.up, experts.down, counts))


def test_zero_rows_give_zero_rows() -> None:
    experts = _experts(3)
    counts = [0, 0, 0]
    got = experts_grouped(_rows(0), experts, counts, _offs(counts), "bf16")
    assert got.shape == (0, D)


@pytest.mark.parametrize("precision", ["bf16", "mxfp8", "nvfp4"])
def test_grouped_and_loop_agree(precision: str) -> None:
    counts = [7, 0, 9, 16]
    experts = _experts(len(counts))
    rows = _rows(sum(counts), seed=3)
    offs = _offs(counts)
    grouped = experts_grouped(rows, experts, counts, offs, precision)
    looped = experts_loop(rows, experts, counts, offs, precision)
    # The same operands on the same grid; only the GEMMs' summation order differs.
    _close(grouped, looped, rel=1e-2)


@pytest.mark.parametrize("reduce", ["sum", "weighted"])
def test_backward_matches_a_matmul_per_expert(reduce: str) -> None:
    """``y.sum().backward()`` sends a stride-0 gradient, which ``_grouped_mm`` rejected
    before ``DenseGrad``; a weighted sum sends a dense one."""
    counts = [6, 0, 10, 16]
    base = _experts(len(counts))
    weights = torch.randn(sum(counts), D, generator=torch.Generator().manual_seed(9))

    def grads(fn: Any) -> list[torch.Tensor]:
        x = _rows(sum(counts)).requires_grad_(True)
        params = [p.detach().clone().requires_grad_(True) for p in base.parameters()]
        y = fn(x, params)
        (y.sum() if reduce == "sum" else (y.float() * weights).sum()).backward()
        return [t.grad for t in (x, *params)]  # type: ignore[misc]

    got = grads(lambda x, p: experts_grouped(x, Experts(*p), counts, _offs(counts), "bf16"))
    want = grads(lambda x, p: _per_expert(x, *p, counts))
    for name, g, w in zip(("rows", "gate", "up", "down"), got, want, strict=True):
        assert g.shape == w.shape, name
        _close(g, w, rel=3e-2)
    # The empty expert gets no gradient at all.
    for g in got[1:]:
        assert not g[1].any()


def test_the_probe_runs_grouped_mm_on_this_torch() -> None:
    assert grouped_mm_probe(CPU) == grouped_probe.GroupedProbe(True, None)


def test_the_probe_says_why_not(monkeypatch: pytest.MonkeyPatch) -> None:
    def rejects(*args: Any, **kwargs: Any) -> torch.Tensor:
        raise RuntimeError("Invalid strides/sizes, got [0, 0]")

    monkeypatch.setattr(torch, "_grouped_mm", rejects)
    probe = grouped_mm_probe(CPU)
    assert not probe.runs and probe.reason is not None
    assert "RuntimeError: Invalid strides/sizes" in probe.reason

    def wrong(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        return x @ w[0]  # every row through the first expert

    monkeypatch.setattr(torch, "_grouped_mm", wrong)
    probe = grouped_mm_probe(CPU)
    assert not probe.runs and probe.reason is not None and "output" in probe.reason

    monkeypatch.delattr(torch, "_grouped_mm")
    probe = grouped_mm_probe(CPU)
    assert not probe.runs and probe.reason is not None
    assert "has no torch._grouped_mm" in probe.reason


def test_each_expert_function_records_its_kernel() -> None:
    counts = [4, 4]
    experts = _experts(2)
    rows = _rows(8)
    EXPERT_KERNELS.reset()
    assert EXPERT_KERNELS.kernel is None
    experts_grouped(rows, experts, counts, _offs(counts), "bf16")
    assert EXPERT_KERNELS.kernel == "grouped_mm"
    experts_loop(rows, experts, counts, _offs(counts), "bf16")
    assert EXPERT_KERNELS.kernel == "grouped_mm+loop"
    EXPERT_KERNELS.reset()

    def compiled(*args: Any) -> torch.Tensor:  # a compiled call runs no Python: no record
        return rows

    expert_kernels.recording(experts_loop, compiled)(rows, experts, counts, _offs(counts), "bf16")
    assert EXPERT_KERNELS.kernel == "loop"


def test_weights_are_drawn_per_global_expert_on_the_device() -> None:
    whole = make_experts(D, FF, 0, 4, 7, torch.bfloat16, CPU)
    part = make_experts(D, FF, 2, 2, 7, torch.bfloat16, CPU)  # rank 1 of EP 2
    for w, p in zip(whole.parameters(), part.parameters(), strict=True):
        assert torch.equal(w[2:], p)
    # expert 3's gate, by hand: its own generator and seed, scaled by 1/sqrt(D)
    g = torch.Generator().manual_seed(7 * 7919 + 3 * 3 + 0 + 1)
    want = (torch.randn(D, FF, generator=g) * D ** -0.5).to(torch.bfloat16)
    assert torch.equal(whole.gate[3], want)
    assert whole.down.shape == (4, FF, D) and whole.down.dtype == torch.bfloat16
