"""The block formats bit by bit, and the routing plan realised as tokens and experts."""

from __future__ import annotations

import pytest
import torch

from runner.model import receive_rows
from runner.quant import (
    dequantize_mxfp8,
    dequantize_nvfp4,
    fake_quantize,
    pack_rows,
    quantize_mxfp8,
    quantize_nvfp4,
    unpack_rows,
    wire_width,
)
from runner.routing import RoutingError, build_plan, rank_routing
from runner.spec import CaseSpec, Shape


def test_mxfp8_scale_is_the_power_of_two_that_fits_448() -> None:
    block = torch.zeros(1, 32)
    block[0, 0], block[0, 1], block[0, 2] = 500.0, 1.0, 480.0  # 500/448 -> scale 2^1
    data, scales = quantize_mxfp8(block)
    assert scales.tolist() == [[127 + 1]]
    assert data.dtype == torch.uint8 and data.shape == (1, 32)
    back = dequantize_mxfp8(data, scales, torch.float32)
    # e4m3 steps by 16 between 128 and 256: 250 rounds to 256; 240 = 1.875 * 2^7 is exact
    assert back[0, :3].tolist() == [512.0, 1.0, 480.0]
    assert quantize_mxfp8(torch.zeros(1, 32))[1].tolist() == [[0]]  # 2^-127 for zeros


def test_nvfp4_packs_two_codes_a_byte_low_nibble_first() -> None:
    x = torch.zeros(1, 16)
    x[0, 0], x[0, 1] = 6.0, -0.5
    packed, scales, tensor_scale = quantize_nvfp4(x)
    assert packed.shape == (1, 8) and scales.shape == (1, 1)
    assert tensor_scale == pytest.approx(6.0 / (6 * 448))
    # 6.0 is code 7; -0.5 is code 1 with the sign bit 8: 0b1001
    assert packed[0, 0] == 0x7 | (0x9 << 4)
    back = dequantize_nvfp4(packed, scales, tensor_scale, torch.float32)
    assert back[0, :2].tolist() == pytest.approx([6.0, -0.5], rel=1e-6)


# Each tie between neighbouring e2m1 values and where round-half-to-even puts it (the
# even code: 0, 1, 2, 4 are codes 0, 2, 4, 6).
TIES = {0.25: 0.0, 0.75: 1.0, 1.25: 1.0, 1.75: 2.0, 2.5: 2.0, 3.5: 4.0, 5.0: 4.0}


def test_nvfp4_rounds_ties_to_even() -> None:
    # Row 1's 10.5 makes the tensor scale 10.5 / (6 * 448) = 2^-8 exactly; row 0's 6.0
    # makes its block scale 6 / 6 / 2^-8 = 256 (exact in e4m3): row 0 is quantized at
    # scale 1, so each tie lands on the grid unscaled.
    x = torch.zeros(2, 16)
    ties = torch.tensor(list(TIES))
    x[0, :7], x[0, 7:14], x[0, 15] = ties, -ties, 6.0
    x[1, 0] = 10.5
    back = dequantize_nvfp4(*quantize_nvfp4(x), torch.float32)
    want = torch.tensor(list(TIES.values()))
    assert back[0, :7].tolist() == want.tolist()
    assert back[0, 7:14].tolist() == (-want).tolist()
    assert back[1, 0].item() == 10.5


@pytest.mark.parametrize("precision", ["mxfp8", "nvfp4"])
def test_zero_rows_quantize_to_zero_rows(precision: str) -> None:
    empty = torch.zeros(0, 64, dtype=torch.bfloat16)
    assert fake_quantize(empty, precision).shape == (0, 64)
    wire = pack_rows(empty, precision)
    assert wire.shape == (0, wire_width(precision, 64))
    assert unpack_rows(wire, precision, 64).shape == (0, 64)


def test_grids_are_fixed_points() -> None:
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    row = torch.cat([grid, -grid]).reshape(1, 16)
    assert torch.equal(fake_quantize(row, "nvfp4"), row)
    q = fake_quantize(torch.randn(4, 64), "mxfp8")
    assert torch.equal(fake_quantize(q, "mxfp8"), q)


@pytest.mark.parametrize(("precision", "bound"), [("mxfp8", 0.05), ("nvfp4", 0.15)])
def test_wire_rows_round_trip(precision: str, bound: float) -> None:
    x = torch.randn(6, 64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    wire = pack_rows(x, precision)
    assert wire.dtype == torch.uint8 and wire.shape == (6, wire_width(precision, 64))
    back = unpack_rows(wire[3:], precision, 64)  # any split of the rows decodes alone
    assert torch.equal(back, fake_quantize(x, precision)[3:])
    error = (back.float() - x[3:].float()).norm() / x[3:].float().norm()
    assert 0 < error < bound


def test_gradients_pass_straight_through() -> None:
    x = torch.randn(2, 32, requires_grad=True)
    fake_quantize(x, "mxfp8").sum().backward()
    assert x.grad is not None and torch.equal(x.grad, torch.ones(2, 32))


SHAPE = Shape(T=16, D=32, E=8, K=2)


@pytest.mark.parametrize("imbalance", [1.0, 1.5, 4.0])
def test_plan_gives_k_distinct_experts_per_token(imbalance: float) -> None:
    case = CaseSpec("inference", 4, "bf16", "standard", "t", 32, imbalance)
    plan = build_plan(SHAPE, case, seed=5)
    for src, rows in enumerate(plan.sources):
        pairs = set(zip(rows.token.tolist(), (rows.dst * 2 + rows.local_expert).tolist(),
                        strict=True))
        assert len(pairs) == SHAPE.TK  # no token meets an expert twice
        assert torch.equal(torch.bincount(rows.token, minlength=SHAPE.T),
                           torch.full((SHAPE.T,), SHAPE.K))
        weights = torch.zeros(SHAPE.T).index_add(0, rows.token, rows.weight)
        assert torch.allclose(weights, torch.ones(SHAPE.T))  # softmax over the K chosen
        assert torch.bincount(rows.dst, minlength=4).tolist() == plan.sends[src]
    routings = [rank_routing(plan, r) for r in range(4)]
    assert [r.rows_received for r in routings] == receive_rows(4, SHAPE.TK, imbalance)
    for rank, r in enumerate(routings):  # each rank's experts share its rows evenly
        assert max(r.expert_counts) - min(r.expert_counts) <= 1
        assert r.send_splits == plan.sends[rank]
    halves = [rank_routing(plan, 0, range(0, 8)), rank_routing(plan, 0, range(8, 16))]
    assert sum(h.rows_received for h in halves) == routings[0].rows_received


def test_plan_refuses_what_k_distinct_experts_cannot_hold() -> None:
    case = CaseSpec("inference", 4, "bf16", "standard", "t", 32, 4.0)
    with pytest.raises(RoutingError, match="imbalance: rank 0 would send"):
        build_plan(Shape(T=16, D=32, E=4, K=2), case, seed=0)  # El = 1 < K
