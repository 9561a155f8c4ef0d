"""The layer's exchange on four real gloo ranks (one launch for every assertion): the
dynamic dispatch gives the static one's outputs and gradients exactly, the deduplicated
one (DeepEP's: one row per (token, rank), the combine reduced on the expert rank) the
same values up to the order of a sum; the bytes each rank sends and receives, both
ways, and the busiest rank's bandwidth, against routing arithmetic written here. EP 4 at
imbalance 4 is issue 23's example: every row goes to rank 0, which gets back its own
256 rows from itself and sends 768 back to the others."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch
import torch.distributed as dist
from live import free_port
from torch.multiprocessing.spawn import spawn

from ingest.schema import Case
from runner.execute import run_case
from runner.experts import make_experts
from runner.matrix import DispatchSettings, MatrixError, Timing, parse_matrix
from runner.phase_report import phase_fields
from runner.phases import phase_outcome, time_phases
from runner.pipelines import REGISTRY, BuildContext
from runner.platform import Platform
from runner.report import PlatformFacts, RankOutcome, build_case
from runner.routing import Plan, build_plan
from runner.spec import CaseSpec, Shape

EP = 4
SHAPE = Shape(T=64, D=32, E=16, K=4)  # TK = 256 rows per rank, four experts per rank
F = 32  # mxfp8 blocks of 32 along the down GEMM's reduction
SEED = 5
IMBALANCES = (4.0, 1.5)
SETTINGS = {"static": DispatchSettings(), "dynamic": DispatchSettings("dynamic"),
            "dedup": DispatchSettings("dynamic", dedup=True),
            "dedup-static": DispatchSettings("static", dedup=True)}
TIMING = Timing(windows=1, iterations=1, warmup=0, warmup_ms=0.0)
MATRIX = {"shape": {"T": SHAPE.T, "D": SHAPE.D, "E": SHAPE.E, "K": SHAPE.K},
          "timing": {"windows": 2, "iterations": 1, "warmup": 0, "warmup_ms": 0},
          "dispatch": {"mode": "dynamic", "dedup": True},
          "matrix": {"mode": "training", "ep": EP, "precision": "bf16", "pipeline": "standard",
                     "F": F, "imbalance": 1.5, "category": "exchange"}}
ROW = SHAPE.D * 4  # float32 rows on the wire


def _spec(imbalance: float, pipeline: str = "standard", precision: str = "bf16") -> CaseSpec:
    return CaseSpec("inference", EP, precision, pipeline, "exchange", F, imbalance)


def _layer(plan: Plan, rank: int, settings: DispatchSettings, pipeline: str,
           precision: str, dtype: torch.dtype, phases: bool) -> dict[str, Any]:
    group = dist.group.WORLD
    ctx = BuildContext(plan, rank, SHAPE.T, precision, group, torch.device("cpu"), False,
                       dtype=dtype, dispatch=settings)
    forward = REGISTRY[pipeline].build(ctx)
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(SHAPE.T, SHAPE.D, generator=g).to(dtype)
    experts = make_experts(SHAPE.D, F, rank * 4, 4, SEED, dtype, torch.device("cpu"))
    with torch.no_grad():
        y = forward(x, experts)
    xg = x.clone().requires_grad_(True)
    forward(xg, experts).backward(torch.ones_like(x))
    if not phases:  # the phase pass's bytes are checked where they differ
        return {"y": y, "grad": xg.grad}
    times = time_phases(ctx, pipeline, experts, x, TIMING, None)
    return {"y": y, "grad": xg.grad, "phase": phase_outcome(times)}


def _worker(rank: int, port: int, out: str) -> None:
    # More ranks than cores: one intra-op thread each, or their OpenMP threads spin
    # against each other (this launch took 13x longer with torch's default).
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=EP)
    try:
        results: dict[str, Any] = {}
        for imbalance in IMBALANCES:
            plan = build_plan(SHAPE, _spec(imbalance), SEED)
            for name, settings in SETTINGS.items():
                results[f"{imbalance}-{name}"] = _layer(plan, rank, settings, "standard",
                                                        "bf16", torch.float32,
                                                        name != "dynamic")
        # Quantized wire rows, padded groups and four token stages, each stage deduplicated
        plan = build_plan(SHAPE, _spec(1.5, "staged", "mxfp8"), SEED)
        for name in ("static", "dedup"):
            results[f"staged-{name}"] = _layer(plan, rank, SETTINGS[name], "staged", "mxfp8",
                                               torch.bfloat16, False)
        # The whole case through the harness, training, dynamic and deduplicated.
        matrix = parse_matrix(MATRIX)
        spec = matrix.cases[0]
        plat = Platform(torch.device("cpu"), "gloo", "CPU", False, {}, "test")
        results["case"] = vars(run_case(spec, matrix.shape, build_plan(matrix.shape, spec, 0),
                                        matrix.timing, 0, plat, rank, dist.group.WORLD,
                                        dispatch=matrix.dispatch))
        torch.save(results, f"{out}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("exchange")
    spawn(_worker, args=(free_port(), str(out)), nprocs=EP, join=True)
    return [torch.load(out / f"rank{r}.pt") for r in range(EP)]


def _pairs(plan: Plan, src: int, dst: int) -> int:
    """Distinct tokens of ``src`` with at least one expert on ``dst``."""
    rows = plan.sources[src]
    return len({int(t) for t, d in zip(rows.token, rows.dst, strict=True) if int(d) == dst})


def _outcomes(ranks: list[dict[str, Any]], key: str) -> list[RankOutcome]:
    return [RankOutcome(rank=r, forward=[1.0], combined=[1.0], backward=None,
                        numerical_error=None, graph_accepted=None, graph_note=None,
                        rows_received=0, rows_sent_off_rank=0, allocated_peak_gib=None,
                        reserved_peak_gib=None, allocation_retries=0, nvlink_tx_gbps=None,
                        nvlink_rx_gbps=None, **ranks[r][key]["phase"]) for r in range(EP)]


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def test_dynamic_gives_the_static_outputs_and_dedup_the_same_values(
        ranks: list[dict[str, Any]]) -> None:
    for got in ranks:
        for imbalance in IMBALANCES:
            static = got[f"{imbalance}-static"]
            dynamic = got[f"{imbalance}-dynamic"]
            assert torch.equal(dynamic["y"], static["y"])
            assert torch.equal(dynamic["grad"], static["grad"])
            for name in ("dedup", "dedup-static"):
                # The expert rank sums a token's weighted outputs before the combine:
                # another order of the same float32 sum.
                assert _relative(got[f"{imbalance}-{name}"]["y"], static["y"]) < 1e-6
                assert _relative(got[f"{imbalance}-{name}"]["grad"], static["grad"]) < 1e-6
        # bf16 rows, mxfp8 on the wire: the same rows quantized once instead of per copy.
        assert got["staged-static"]["y"].norm() > 0
        assert _relative(got["staged-dedup"]["y"], got["staged-static"]["y"]) < 1e-2
        assert _relative(got["staged-dedup"]["grad"], got["staged-static"]["grad"]) < 1e-2


def test_the_hot_rank_sends_back_what_it_received(ranks: list[dict[str, Any]]) -> None:
    # EP 4, i = 4: every rank sends its 256 rows to rank 0 (4 x the mean of 256).
    fields = phase_fields(_outcomes(ranks, "4.0-static"), forward_ms=1.0, backward_ms=None)
    tk = SHAPE.T * SHAPE.K
    assert fields["dispatchRemoteBytes"] == [3 * tk * ROW, 0, 0, 0]
    assert fields["dispatchSentRemoteBytes"] == [0, tk * ROW, tk * ROW, tk * ROW]
    # The combine: rank 0 gets its own 256 back from itself and sends 768 to the others;
    # counting the rows a rank gets back finds 256 at most.
    assert fields["combineRemoteBytes"] == [0, tk * ROW, tk * ROW, tk * ROW]
    assert fields["combineSentRemoteBytes"] == [768 * ROW, 0, 0, 0]
    assert fields["combineBusiestRank"] == 0 == fields["dispatchBusiestRank"]
    ms = fields["phaseMS"]
    assert fields["combineGBps"] == pytest.approx(768 * ROW / ms["combine"] / 1e6)
    assert fields["dispatchGBps"] == pytest.approx(768 * ROW / ms["dispatch"] / 1e6)


def test_dedup_sends_one_row_per_token_and_rank(ranks: list[dict[str, Any]]) -> None:
    for imbalance in IMBALANCES:
        plan = build_plan(SHAPE, _spec(imbalance), SEED)
        outcomes = {name: _outcomes(ranks, f"{imbalance}-{name}")
                    for name in ("static", "dedup", "dedup-static")}
        for r in range(EP):
            others = [o for o in range(EP) if o != r]
            sent = sum(_pairs(plan, r, d) for d in others) * ROW
            received = sum(_pairs(plan, s, r) for s in others) * ROW
            for name in ("dedup", "dedup-static"):
                o = outcomes[name][r]
                assert o.dispatch_sent_remote_bytes == sent
                assert o.dispatch_remote_bytes == received
                assert o.dispatch_local_bytes == _pairs(plan, r, r) * ROW
                # The combine returns one reduced row per (token, rank): the reverse.
                assert o.combine_sent_remote_bytes == received
                assert o.combine_remote_bytes == sent
            static = outcomes["static"][r]
            assert static.dispatch_sent_remote_bytes == sum(plan.sends[r][d]
                                                            for d in others) * ROW
        if imbalance == 4.0:  # all four experts of every token on rank 0: 64 of 256
            assert outcomes["dedup"][0].dispatch_remote_bytes == 3 * SHAPE.T * ROW


def test_a_dynamic_dedup_case_through_the_harness(ranks: list[dict[str, Any]]) -> None:
    matrix = parse_matrix(MATRIX)
    spec = matrix.cases[0]
    outcomes = [RankOutcome(**got["case"]) for got in ranks]
    facts = PlatformFacts("CPU", False, {}, {}, None, None, "none")
    case = Case.model_validate(build_case(spec, matrix, outcomes, facts, 2e-2))
    assert (case.dispatchMode, case.dispatchDedup) == ("dynamic", True)
    assert case.numericalAccepted and case.failure is None and case.ooms == 0
    assert case.inLayerPhaseMS is not None and case.phaseMS is not None
    assert case.backwardPhaseMS is not None
    plan = build_plan(matrix.shape, spec, 0)
    row = SHAPE.D * 2  # bf16
    assert case.dispatchSentRemoteBytes == [
        sum(_pairs(plan, r, d) for d in range(EP) if d != r) * row for r in range(EP)]
    assert case.combineSentRemoteBytes == case.dispatchRemoteBytes == [
        sum(_pairs(plan, s, r) for s in range(EP) if s != r) * row for r in range(EP)]


def test_the_matrix_reads_the_dispatch_table() -> None:
    base = {"shape": {"T": 8, "D": 4, "E": 4, "K": 2},
            "matrix": {"mode": "inference", "ep": 2, "precision": "bf16",
                       "pipeline": "standard", "F": 4, "imbalance": 1, "category": "x"}}
    assert parse_matrix(base).dispatch == DispatchSettings("static", False)
    both = parse_matrix({**base, "dispatch": {"mode": "dynamic", "dedup": True}})
    assert both.dispatch == DispatchSettings("dynamic", True)
    with pytest.raises(MatrixError, match=r"^dispatch.mode: must be one of static, dynamic"):
        parse_matrix({**base, "dispatch": {"mode": "eager"}})
    with pytest.raises(MatrixError, match=r"^dispatch.dedup: must be true or false"):
        parse_matrix({**base, "dispatch": {"dedup": "yes"}})
    with pytest.raises(MatrixError, match=r"^dispatch.sort: unknown key"):
        parse_matrix({**base, "dispatch": {"sort": 1}})

