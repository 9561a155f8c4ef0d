"""Dynamic dispatch, as a real dispatcher does it: the building blocks (runner/exchange.py
wires them into the layer when the matrix's [dispatch] asks for them).

Megatron-LM's MoEAlltoAllTokenDispatcher learns what it will receive at run time: each
rank's per-destination row counts go through an ``all_to_all_single`` on the device and
are copied to the host (a device-to-host sync, so a CUDA graph cannot hold it) before the
payload all-to-all. DeepEP also sends a token once per destination rank however many of
that rank's experts it chose, and the receiver expands it back to one row per (token,
expert). Both live here so the static path in runner/layer.py stays as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


def exchange_counts(send_splits: list[int], group: Any, device: torch.device) -> list[int]:
    """Rows each source sends this rank, learnt on the device and copied to the host."""
    send = torch.tensor(send_splits, dtype=torch.int64, device=device)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return [int(c) for c in recv.tolist()]  # the host sync Megatron pays before the payload


def all_to_all_rows(rows: torch.Tensor, send_splits: list[int], recv_splits: list[int],
                    group: Any) -> torch.Tensor:
    out = rows.new_empty((sum(recv_splits),) + tuple(rows.shape[1:]))
    dist.all_to_all_single(out, rows.contiguous(), recv_splits, send_splits, group=group)
    return out


def dynamic_dispatch(rows: torch.Tensor, send_splits: list[int], group: Any
                     ) -> tuple[torch.Tensor, list[int]]:
    """Rows sorted by destination to their ranks; returns them and the counts exchanged."""
    recv_splits = exchange_counts(send_splits, group, rows.device)
    return all_to_all_rows(rows, send_splits, recv_splits, group), recv_splits


@dataclass(frozen=True)
class DedupLayout:
    """One source's rows (sorted by destination) with each (token, destination) sent once.

    unique_token: the tokens to send, destination by destination.
    unique_splits: how many of them go to each destination.
    position: for each original row, its index within its destination's unique block;
      the receiver uses it to expand the block back into one row per (token, expert).
    """

    unique_token: torch.Tensor
    unique_splits: list[int]
    position: torch.Tensor


def dedup_layout(token: torch.Tensor, dst: torch.Tensor, ep: int) -> DedupLayout:
    if token.numel() and bool((dst[1:] < dst[:-1]).any()):
        raise ValueError("dedup_layout: rows must be sorted by destination rank")
    unique_tokens: list[torch.Tensor] = []
    positions: list[torch.Tensor] = []
    splits: list[int] = []
    for rank in range(ep):
        mine = token[dst == rank]
        uniq, inverse = torch.unique(mine, sorted=True, return_inverse=True)
        unique_tokens.append(uniq)
        positions.append(inverse)
        splits.append(int(uniq.numel()))
    return DedupLayout(torch.cat(unique_tokens), splits, torch.cat(positions))


@dataclass(frozen=True)
class DispatchBytes:
    """One rank's dispatch bytes both ways; local = to or from itself (no wire)."""

    send_local: int
    send_remote: int
    recv_local: int
    recv_remote: int


def dispatch_bytes(rank: int, send_splits: list[int], recv_splits: list[int],
                   row_bytes: int) -> DispatchBytes:
    return DispatchBytes(
        send_local=send_splits[rank] * row_bytes,
        send_remote=(sum(send_splits) - send_splits[rank]) * row_bytes,
        recv_local=recv_splits[rank] * row_bytes,
        recv_remote=(sum(recv_splits) - recv_splits[rank]) * row_bytes)


def dedup_dispatch(x: torch.Tensor, token: torch.Tensor, dst: torch.Tensor,
                   send_splits: list[int], group: Any
                   ) -> tuple[torch.Tensor, list[int], list[int]]:
    """The same rows as the static dispatch receives, each (token, rank) sent once.

    Returns the expanded rows and the payload rows sent to and received from each rank
    (for dispatch_bytes)."""
    ep = len(send_splits)
    layout = dedup_layout(token, dst, ep)
    payload, unique_recv = dynamic_dispatch(x.index_select(0, layout.unique_token),
                                            layout.unique_splits, group)
    recv_splits = exchange_counts(send_splits, group, x.device)
    # The expansion index travels with the rows, as DeepEP's receiver gets topk indices.
    position = all_to_all_rows(layout.position, send_splits, recv_splits, group)
    starts = torch.tensor([0] + unique_recv[:-1], dtype=torch.int64).cumsum(0)
    source = torch.repeat_interleave(torch.arange(ep), torch.tensor(recv_splits))
    return payload.index_select(0, starts[source] + position), layout.unique_splits, unique_recv
