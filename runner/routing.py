"""Routing: the imbalance plan of the model realised as K distinct experts per token.

Every rank computes the same global plan from the seed (static routing: the router's
cost is not part of the measured layer), so each rank knows what it will receive
without exchanging metadata inside the timed step.

- sends[src][dst] comes from ``model.send_matrix`` (column sums = receiveRows).
- Destination d's rows, taken source by source, go to its El experts round-robin, so
  every expert of a rank gets an even share (spares to the first experts), as the model
  assumes.
- A source's TK (token, expert) rows are sorted by global expert and dealt to a seeded
  permutation of its T tokens in turn; an expert with at most T rows from one source
  then never meets the same token twice, which gives K distinct experts per token.
- Router scores: seeded logits [T, E]; a row's weight is the softmax of the token's
  logits over its K chosen experts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runner.model import receive_rows, send_matrix
from runner.spec import CaseSpec, Shape


class RoutingError(ValueError):
    pass


@dataclass(frozen=True)
class SourceRows:
    """One source rank's routed rows, sorted by global expert (= by destination)."""

    token: torch.Tensor  # [TK] int64
    dst: torch.Tensor  # [TK] int64
    local_expert: torch.Tensor  # [TK] int64
    weight: torch.Tensor  # [TK] float32


@dataclass(frozen=True)
class Plan:
    ep: int
    experts_per_rank: int
    receive: list[int]
    sends: list[list[int]]
    sources: list[SourceRows]


def build_plan(shape: Shape, case: CaseSpec, seed: int) -> Plan:
    ep, tk = case.ep, shape.TK
    el = shape.E // ep
    receive = receive_rows(ep, tk, case.imbalance)
    sends = send_matrix(ep, tk, receive)
    # Offset of each source's block within each destination's rows.
    offsets = [[sum(sends[s][d] for s in range(src)) for d in range(ep)] for src in range(ep)]
    sources = []
    for src in range(ep):
        dst_list: list[int] = []
        expert_list: list[int] = []
        for dst in range(ep):
            for j in range(sends[src][dst]):
                dst_list.append(dst)
                expert_list.append((offsets[src][dst] + j) % el)
        dst_t = torch.tensor(dst_list, dtype=torch.int64)
        exp_t = torch.tensor(expert_list, dtype=torch.int64)
        order = torch.argsort(dst_t * el + exp_t, stable=True)
        dst_t, exp_t = dst_t[order], exp_t[order]
        counts = torch.bincount(dst_t * el + exp_t, minlength=shape.E)
        if int(counts.max()) > shape.T:
            raise RoutingError(
                f"imbalance: rank {src} would send {int(counts.max())} rows to one expert, "
                f"more than its T={shape.T} tokens (K distinct experts per token needs "
                f"K <= E/ep = {el} at this imbalance)")
        generator = torch.Generator().manual_seed(seed * 1_000_003 + src)
        permutation = torch.randperm(shape.T, generator=generator)
        token = permutation[torch.arange(tk) % shape.T]
        logits = torch.randn(shape.T, shape.E, generator=generator)
        global_expert = dst_t * el + exp_t
        chosen = torch.full((shape.T, shape.K), -1, dtype=torch.int64)
        slot = torch.arange(tk) // shape.T
        chosen[token, slot] = global_expert
        token_weights = torch.softmax(torch.gather(logits, 1, chosen), dim=-1)
        weight = token_weights[token, slot]
        sources.append(SourceRows(token, dst_t, exp_t, weight))
    return Plan(ep, el, receive, sends, sources)


@dataclass(frozen=True)
class RankRouting:
    """What one rank sends and receives for a subset of its tokens (a stage)."""

    send_token: torch.Tensor  # [S] token of each sent row, grouped by destination
    send_weight: torch.Tensor  # [S]
    send_splits: list[int]  # rows to each destination
    recv_splits: list[int]  # rows from each source
    recv_order: torch.Tensor  # [R] received rows -> expert order (stable by expert)
    expert_counts: list[int]  # [El] rows per local expert

    @property
    def rows_received(self) -> int:
        return sum(self.recv_splits)


def rank_routing(plan: Plan, rank: int, tokens: range | None = None) -> RankRouting:
    def selected(src: int) -> torch.Tensor:
        rows = plan.sources[src]
        if tokens is None:
            return torch.ones_like(rows.token, dtype=torch.bool)
        return (rows.token >= tokens.start) & (rows.token < tokens.stop)

    mine = plan.sources[rank]
    keep = selected(rank)
    send_dst = mine.dst[keep]
    send_splits = torch.bincount(send_dst, minlength=plan.ep).tolist()
    recv_experts = []
    recv_splits = []
    for src in range(plan.ep):
        rows = plan.sources[src]
        here = selected(src) & (rows.dst == rank)
        recv_experts.append(rows.local_expert[here])
        recv_splits.append(int(here.sum()))
    recv_expert = torch.cat(recv_experts)
    return RankRouting(
        send_token=mine.token[keep], send_weight=mine.weight[keep],
        send_splits=send_splits, recv_splits=recv_splits,
        recv_order=torch.argsort(recv_expert, stable=True),
        expert_counts=torch.bincount(recv_expert, minlength=plan.experts_per_rank).tolist(),
    )
