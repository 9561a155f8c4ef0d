"""fp8 training through the scaled GEMMs (runner.fp8_autograd): the forward and every
gradient of one expert linear against the same products worked out here from the exact
fp8 operands (decoded in float64), and against the unquantized product; the experts'
training path counted native with its gradients on the bf16 master weights.

Rowwise runs the CPU's own ``torch._scaled_mm``; blockwise and grouped go through the CPU
renderings of tests/scaled_mm_cpu.py, which check torch's layouts first."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cpu_fp8
import pytest
import torch
from live import REPO
from runner_helpers import run_args
from scaled_mm_cpu import blockwise_mm, decode, grouped_mm
from site_hooks import env_with_site

from ingest.derived import derive
from ingest.schema import Case
from ingest.validate import validate_report
from runner import native
from runner.execute import ERROR_BOUNDS
from runner.expert_kernels import EXPERT_KERNELS, experts_loop, experts_native
from runner.experts import make_experts, quantize_experts
from runner.fp8 import quantize_fp8_rows, quantize_fp8_rowwise, quantize_fp8_tiles
from runner.fp8_autograd import fp8_linear
from runner.native import USAGE, Operand, stack_operands

K, N = 128, 256
COUNTS = [5, 0, 27]  # an expert without rows; 27 tokens pad to 32 (rowwise) or 128
RECIPES = ["rowwise", "blockwise", "grouped"]


@pytest.fixture(params=RECIPES)
def recipe(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[str]:
    saved = (native.FP8.scaling, native.FP8.grouped)
    native.FP8.scaling = "blockwise" if request.param == "blockwise" else "rowwise"
    native.FP8.grouped = request.param == "grouped"
    if request.param == "blockwise":
        monkeypatch.setattr(torch, "_scaled_mm", blockwise_mm)
    if request.param == "grouped":
        monkeypatch.setattr(torch, "_scaled_grouped_mm", grouped_mm, raising=False)
    yield request.param
    native.FP8.scaling, native.FP8.grouped = saved


def _quantized(m: torch.Tensor, blockwise: bool, weight: bool = False) -> torch.Tensor:
    """m [rows, K] on the recipe's grid along K, decoded in float64 from runner.fp8's
    e4m3 bytes and fp32 scales (the quantizers tests/test_runner_fp8.py checks by hand)."""
    if not blockwise:
        data, scales = quantize_fp8_rowwise(m)
    else:
        data, scales = (quantize_fp8_tiles if weight else quantize_fp8_rows)(m)
    return decode(data.view(torch.float8_e4m3fn), scales).double()


def _along_tokens(t: torch.Tensor, blockwise: bool) -> torch.Tensor:
    """tᵀ quantized along the tokens, padded with zero tokens to 128 / 16, as Wgrad's."""
    pad = -t.shape[0] % (128 if blockwise else 16)
    return _quantized(torch.nn.functional.pad(t.t(), (0, pad)), blockwise)[:, :t.shape[0]]


def _by_hand(x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor, blockwise: bool
             ) -> list[torch.Tensor]:
    """y, dx, dw in float64 from the operands each GEMM of the recipe takes."""
    xq = _quantized(x, blockwise)
    dyq = _quantized(dy, blockwise)
    ys, dxs, dw, start = [], [], torch.zeros(w.shape, dtype=torch.float64), 0
    for e, n in enumerate(COUNTS):
        a, b, start = start, start + n, start + n
        if not n:
            continue
        wt_fwd = _quantized(w[e].t().contiguous(), blockwise, weight=True)  # Wᵀ [N, K]
        # Dgrad's W [K, N]: blockwise, the forward's tiles; rowwise, one scale per row of W
        w_dgrad = wt_fwd.t() if blockwise else _quantized(w[e], blockwise)
        ys.append(xq[a:b] @ wt_fwd.t())
        dxs.append(dyq[a:b] @ w_dgrad.t())
        dw[e] = _along_tokens(x[a:b], blockwise) @ _along_tokens(dy[a:b], blockwise).t()
    return [torch.cat(ys), torch.cat(dxs), dw]


def _operands(w: torch.Tensor) -> list[Operand]:
    return [native.quantize_operand(m.t().contiguous(), "fp8", weight=True)
            for m in w.unbind(0)]


def _run(x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor) -> list[torch.Tensor]:
    xg, wg = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    weights = _operands(w)
    grouped = stack_operands(weights) if native.FP8.grouped else None
    offs = torch.tensor(COUNTS).cumsum(0).to(torch.int32)
    xq = native.quantize_operand(x, "fp8")
    y = fp8_linear(xg, wg, xq, weights, grouped, COUNTS, offs)
    y.backward(dy)
    assert xg.grad is not None and wg.grad is not None
    return [y.detach(), xg.grad, wg.grad]


def _draw(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).bfloat16()


def _rel(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double() - want).norm() / want.norm())


def test_fprop_dgrad_wgrad_match_the_fp8_operands_by_hand(recipe: str) -> None:
    """Each output is the float64 product of the operands' decoded e4m3 values, up to the
    GEMM's bf16 output rounding (2^-9 relative) and its float32 accumulation; the expert
    without rows gets a zero weight gradient."""
    n = sum(COUNTS)
    x, dy = _draw(n, K, seed=1), _draw(n, N, seed=2)
    w = (_draw(len(COUNTS), K, N, seed=3).float() * K ** -0.5).bfloat16()
    got = _run(x, w, dy)
    want = _by_hand(x, w, dy, recipe == "blockwise")
    for g, ref in zip(got, want, strict=True):
        assert g.dtype == torch.bfloat16 and g.shape == ref.shape
        atol = 2 ** -8 * float(ref.abs().max()) * 1e-2  # float32 sums' cancellations
        assert torch.allclose(g.double(), ref, rtol=2 ** -8, atol=atol)
    assert not got[2][1].any()


def test_gradients_within_fp8_error_of_the_unquantized_product(recipe: str) -> None:
    n = sum(COUNTS)
    x, dy = _draw(n, K, seed=4), _draw(n, N, seed=5)
    w = (_draw(len(COUNTS), K, N, seed=6).float() * K ** -0.5).bfloat16()
    y, dx, dw = _run(x, w, dy)
    xd, wd, dyd = x.double(), w.double(), dy.double()
    bounds = torch.tensor([0, *COUNTS]).cumsum(0).tolist()
    ranges = [(e, bounds[e], bounds[e + 1]) for e in range(len(COUNTS)) if COUNTS[e]]
    want_y = torch.cat([xd[a:b] @ wd[e] for e, a, b in ranges])
    want_dx = torch.cat([dyd[a:b] @ wd[e].t() for e, a, b in ranges])
    want_dw = torch.stack([xd[bounds[e]:bounds[e + 1]].t() @ dyd[bounds[e]:bounds[e + 1]]
                           for e in range(len(COUNTS))])
    errors = [_rel(y, want_y), _rel(dx, want_dx), _rel(dw, want_dw)]
    assert all(0.005 < e < 0.1 for e in errors), errors  # quantized, within fp8's error


def test_experts_train_natively_and_grads_reach_the_master_weights(recipe: str) -> None:
    """experts_native with gradients: counted native, the scaled kernel recorded, and the
    bf16 parameters' gradients within fp8's error of the emulated path's (the same recipe
    on the grid in bf16 GEMMs)."""
    counts = COUNTS
    offs = torch.tensor(counts).cumsum(0).to(torch.int32)
    rows = _draw(sum(counts), K, seed=7)
    built = make_experts(K, N, 0, len(counts), 7, torch.bfloat16, torch.device("cpu"))
    experts = quantize_experts(built, "fp8", native=True)

    def grads(fn: Any) -> list[torch.Tensor]:
        ex = experts.with_parameters(*(p.detach().clone().requires_grad_(True)
                                       for p in experts.parameters()))
        x = rows.clone().requires_grad_(True)
        fn(x, ex, counts, offs, "fp8").float().square().sum().backward()
        return [t.grad for t in (x, *ex.parameters()) if t.grad is not None]

    USAGE.reset()
    EXPERT_KERNELS.reset()
    got = grads(experts_native(experts_loop))
    assert (USAGE.native, USAGE.emulated) == (1, 0)
    assert EXPERT_KERNELS.kernel == ("scaled_grouped_mm" if recipe == "grouped"
                                     else "scaled_mm_loop")
    assert EXPERT_KERNELS.scaling == native.FP8.scaling
    want = grads(experts_loop)
    assert len(got) == len(want) == 4
    for g, ref in zip(got, want, strict=True):
        assert g.dtype == torch.bfloat16 and 0 < _rel(g, ref.double()) < 0.1


def _training_matrix() -> str:
    """test_runner_fp8's smallest fp8 case, in training: EP 2, D = F = 128, T 32."""
    return "\n".join([
        "seed = 5", "[shape]", "T = 32", "D = 128", "E = 4", "K = 2", "[timing]",
        "windows = 2", "iterations = 1", "warmup = 1", "warmup_ms = 1", "[[case]]",
        'mode = "training"', "ep = 2", 'precision = "fp8"', 'pipeline = "standard"',
        "F = 128", "imbalance = 1.0", 'category = "tiny"']) + "\n"


def test_an_fp8_training_case_runs_native_where_the_probe_says_so(tmp_path: Path) -> None:
    """``moescope run`` on two gloo ranks with the probe trying its candidates on the CPU
    (tests/cpu_fp8.py): it finds the rowwise ``_scaled_mm``, and the training case then
    runs its expert GEMMs, forward and backward, through it: recorded native, and its
    numerics (output and every gradient against float32) within fp8's bound."""
    args, out = run_args(tmp_path, _training_matrix())
    ran = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=180,
                         env=env_with_site({**os.environ, cpu_fp8.ENV: "1"}))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    written = json.loads(out.read_text())
    report = validate_report(written)
    host = written["meta"]["host"]
    assert host["nativeScaledGEMM"]["fp8"] is True
    assert host["fp8Native"]["scaling"] == "rowwise"
    (raw,) = written["cases"]
    assert raw["emulated"] is False
    assert raw["expertKernel"] == "scaled_mm_loop" and raw["fp8Scaling"] == "rowwise"
    assert raw["numericalAccepted"] is True
    assert 0 < raw["numericalRelativeError"] < raw["numericalBound"] == ERROR_BOUNDS["fp8"]
    # the grouped ceiling times the same native training GEMMs, so the case gets a %
    (ceiling,) = written["meta"]["measuredCeilings"]["grouped"]
    assert (ceiling["mode"], ceiling["kernel"]) == ("training", "torch._scaled_mm per expert")
    assert ceiling["emulated"] is False
    derived = derive(report.meta, Case.model_validate(raw))
    assert derived.percentOfMeasuredCeiling is not None and derived.percentOfMeasuredCeiling > 0


def test_the_training_ceiling_times_the_fp8_backward_gemms(recipe: str) -> None:
    """The fp8 training ceiling's set returns every input's and weight's gradient through
    the scaled GEMMs: within fp8's error of the products written out here (output
    gradients of ones, which e4m3 holds exactly)."""
    from runner.gemm_ceilings import fp8_training_set

    rows, d, f = 16, 128, 128
    x, h = _draw(2 * rows, d, seed=8), _draw(2 * rows, f, seed=9)
    gate, up, down = (_draw(2, a, b, seed=10 + i) for i, (a, b) in
                      enumerate([(d, f), (d, f), (f, d)]))
    offs = torch.tensor([rows, 2 * rows], dtype=torch.int32)
    kernel = "torch._scaled_grouped_mm" if recipe == "grouped" else "torch._scaled_mm"
    run = fp8_training_set(kernel, (x.clone(), h.clone()),  # it makes its inputs leaves
                           (gate.clone(), up.clone(), down.clone()), offs)
    dx, dh, dgate, dup, ddown = run()
    xd, hd = x.double(), h.double()
    parts = [(0, rows), (rows, 2 * rows)]
    ones_f, ones_d = torch.ones(rows, f, dtype=torch.float64), torch.ones(rows, d,
                                                                          dtype=torch.float64)
    want_dx = torch.cat([ones_f @ (gate[e] + up[e]).double().t() for e in range(2)])
    want_dh = torch.cat([ones_d @ down[e].double().t() for e in range(2)])
    want_dw = torch.stack([xd[a:b].t() @ ones_f for a, b in parts])
    want_ddown = torch.stack([hd[a:b].t() @ ones_d for a, b in parts])
    for got, want in ((dx, want_dx), (dh, want_dh), (dgate, want_dw), (dup, want_dw),
                      (ddown, want_ddown)):
        assert 0 < _rel(got, want) < 0.1


def test_the_backward_keeps_x_in_fp8(recipe: str) -> None:
    """What the forward saves for the backward (autograd's saved-tensor hooks see each
    one): the master weight itself, and x quantized along each expert's tokens, e4m3
    bytes with fp32 scales; never a bf16 copy of x."""
    n = sum(COUNTS)
    x = _draw(n, K, seed=12).requires_grad_(True)
    w = _draw(len(COUNTS), K, N, seed=13).requires_grad_(True)
    weights = _operands(w.detach())
    grouped = stack_operands(weights) if native.FP8.grouped else None
    offs = torch.tensor(COUNTS).cumsum(0).to(torch.int32)
    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fp8_linear(x, w, native.quantize_operand(x.detach(), "fp8"), weights, grouped,
                   COUNTS, offs)
    assert saved[0] is w
    pad = 16 if recipe != "blockwise" else 128
    data = [t for t in saved[1:] if t.dtype == torch.uint8]
    assert [tuple(t.shape) for t in data] == [(K, -c % pad + c) for c in COUNTS if c]
    assert all(t.dtype == torch.float32 for t in saved[1:] if t.dtype != torch.uint8)
    assert len(saved) == 1 + 2 * len(data)
