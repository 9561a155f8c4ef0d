"""Dynamic and deduplicated dispatch on real gloo ranks: the counts exchanged on the
device equal the plan's send matrix, dynamic receives exactly what the static exchange
(splits known on the host) receives, and dedup sends one row per distinct (token,
destination rank), all against routing arithmetic written here."""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist
from live import free_port
from torch.multiprocessing.spawn import spawn

from runner.dispatch import (
    DispatchBytes,
    all_to_all_rows,
    dedup_dispatch,
    dispatch_bytes,
    dynamic_dispatch,
    exchange_counts,
)
from runner.model import receive_rows, send_matrix
from runner.routing import build_plan
from runner.spec import CaseSpec, Shape

SHAPE = Shape(T=8, D=4, E=6, K=3)  # two experts per rank: a token meets a rank twice
CASE = CaseSpec(mode="inference", ep=3, precision="bf16", pipeline="standard",
                category="dispatch", F=4, imbalance=2.0)
EP, T, D = CASE.ep, SHAPE.T, SHAPE.D
SEED = 7


def _routing(src: int) -> tuple[torch.Tensor, torch.Tensor]:
    rows = build_plan(SHAPE, CASE, SEED).sources[src]
    return rows.token, rows.dst


def _distinct_pairs(src: int) -> int:
    token, dst = _routing(src)
    return len({(int(t), int(d)) for t, d in zip(token, dst, strict=True)})


def _pairs_to(src: int, dst: int) -> int:
    token, dsts = _routing(src)
    return len({int(t) for t, d in zip(token, dsts, strict=True) if int(d) == dst})


def _plan() -> list[list[int]]:
    return send_matrix(EP, SHAPE.TK, receive_rows(EP, SHAPE.TK, CASE.imbalance))


def _worker(rank: int, port: int, out: str) -> None:
    # More ranks than cores: one intra-op thread each, or their OpenMP threads spin
    # against each other (this launch took 13x longer with torch's default).
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=EP)
    try:
        token, dst = _routing(rank)
        x = torch.arange(T * D, dtype=torch.float32).reshape(T, D) + 1000.0 * rank
        send_splits = [int((dst == d).sum()) for d in range(EP)]
        counts = exchange_counts(send_splits, None, torch.device("cpu"))
        plan = _plan()
        static = all_to_all_rows(x.index_select(0, token), send_splits,
                                 [plan[s][rank] for s in range(EP)], None)
        dynamic, dyn_counts = dynamic_dispatch(x.index_select(0, token), send_splits, None)
        deduped, sent, received = dedup_dispatch(x, token, dst, send_splits, None)
        wire = dispatch_bytes(rank, sent, received, D * x.element_size())
        torch.save({"counts": counts, "dyn_counts": dyn_counts, "static": static,
                    "dynamic": dynamic, "deduped": deduped, "sent": sum(sent), "wire": vars(wire)},
                   f"{out}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_dynamic_and_dedup_dispatch(tmp_path: Path) -> None:
    spawn(_worker, args=(free_port(), str(tmp_path)), nprocs=EP, join=True)
    plan = _plan()
    assert sum(map(sum, plan)) == EP * SHAPE.TK
    for rank in range(EP):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        column = [plan[s][rank] for s in range(EP)]
        assert got["counts"] == column
        assert got["dyn_counts"] == column
        assert got["static"].shape[0] == sum(column)
        assert torch.equal(got["dynamic"], got["static"])
        assert torch.equal(got["deduped"], got["static"])
        assert got["sent"] == _distinct_pairs(rank)
        row = D * 4  # float32 rows
        others = [r for r in range(EP) if r != rank]
        assert DispatchBytes(**got["wire"]) == DispatchBytes(
            send_local=_pairs_to(rank, rank) * row,
            send_remote=sum(_pairs_to(rank, d) for d in others) * row,
            recv_local=_pairs_to(rank, rank) * row,
            recv_remote=sum(_pairs_to(s, rank) for s in others) * row)
    # The routing repeats some (token, rank) pairs, so dedup must send fewer rows.
    assert sum(_distinct_pairs(r) for r in range(EP)) < EP * SHAPE.TK
