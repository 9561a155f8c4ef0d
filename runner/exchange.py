"""The layer's dispatch and combine when the matrix asks for a real dispatcher's
(``[dispatch]``: ``mode = "dynamic"``, ``dedup = true``); runner.layer's static exchange
otherwise. Built on runner.dispatch's pieces.

- dynamic: each step first exchanges the row counts on the device and copies them to the
  host (``runner.dispatch.exchange_counts``), as Megatron-LM's MoEAlltoAllTokenDispatcher
  does before its payload all-to-all; the combine returns along the splits that exchange
  gave. The copy syncs the host, so no CUDA graph can hold the step: the layer and its
  phases are timed eagerly (the case's graph note says so).
- dedup: a token goes once to each destination rank however many of that rank's
  experts chose it, as DeepEP's dispatch sends it; the receiver expands the rows back to
  one per (token, expert). The combine is DeepEP's too: the expert rank sums a token's
  score-weighted expert outputs and sends one row back per (token, rank), which the
  home rank adds up. What the expansion needs (each row's place within its token's
  block, and its router weight, which DeepEP sends with the rows as topk indices and
  weights) is exchanged once when the layer is built: routing is fixed before a case and
  not timed (runner.routing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from runner.collectives import AllToAll, QuantizedAllToAll, quantized_all_to_all
from runner.dispatch import all_to_all_rows, dedup_layout, exchange_counts
from runner.layer import DeviceRouting, PassConfig


@dataclass(frozen=True)
class Dedup:
    """One stage's deduplicated exchange on this rank."""

    unique_token: torch.Tensor  # the tokens this rank sends, destination by destination
    send: list[int]  # (token, rank) rows this rank sends to each rank
    recv: list[int]  # (token, rank) rows it receives from each rank
    expand: torch.Tensor  # each received (token, expert) row -> its (token, rank) row
    weight: torch.Tensor  # each received (token, expert) row's router weight


class Exchange:
    def __init__(self, dynamic: bool, dedup: bool, group: Any, device: torch.device) -> None:
        self.dynamic, self.dedup, self.group, self.device = dynamic, dedup, group, device
        self.layouts: dict[int, Dedup] = {}
        self.last_recv: dict[int, list[int]] = {}  # per routing: the splits last exchanged

    def attach(self, r: DeviceRouting) -> None:
        """At build, untimed: dedup's layout of one stage's routing."""
        if not self.dedup:
            return
        ep = len(r.send_splits)
        dst = torch.repeat_interleave(torch.arange(ep), torch.tensor(r.send_splits))
        layout = dedup_layout(r.token.cpu(), dst, ep)
        recv = exchange_counts(layout.unique_splits, self.group, self.device)
        position = all_to_all_rows(layout.position.to(self.device), r.send_splits,
                                   r.recv_splits, self.group)
        weight = all_to_all_rows(r.weight, r.send_splits, r.recv_splits, self.group)
        starts = torch.tensor([0, *recv[:-1]], dtype=torch.int64).cumsum(0).to(self.device)
        source = torch.repeat_interleave(torch.arange(ep), torch.tensor(r.recv_splits))
        self.layouts[id(r)] = Dedup(layout.unique_token.to(self.device), layout.unique_splits,
                                    recv, starts[source.to(self.device)] + position, weight)

    def wire_splits(self, r: DeviceRouting) -> tuple[list[int], list[int]]:
        """Rows on the wire to and from each rank (dedup: one per (token, rank))."""
        layout = self.layouts.get(id(r))
        return (layout.send, layout.recv) if layout else (r.send_splits, r.recv_splits)

    def _recv_splits(self, r: DeviceRouting, send: list[int]) -> list[int]:
        if self.dynamic:  # Megatron's count all-to-all and its device-to-host copy
            recv = exchange_counts(send, self.group, self.device)
        else:
            recv = self.wire_splits(r)[1]
        self.last_recv[id(r)] = recv
        return recv

    def dispatch(self, x: torch.Tensor, r: DeviceRouting, cfg: PassConfig
                 ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the received rows, one per (token, expert) in the static exchange's order;
        the wire rows where a native GEMM takes them, see runner.layer.dispatch_wire)."""
        layout = self.layouts.get(id(r))
        rows = x.index_select(0, layout.unique_token if layout else r.token)
        send = self.wire_splits(r)[0]
        recv_splits = self._recv_splits(r, send)
        wire = None
        if not cfg.quantized_dispatch:
            recv = AllToAll.apply(rows, recv_splits, send, cfg.group,  # type: ignore[no-untyped-call]
                                  cfg.traceable)
        elif cfg.wire_to_gemm and not torch.is_grad_enabled():
            recv, wire = quantized_all_to_all(rows, recv_splits, send, cfg.group,
                                               cfg.traceable, cfg.precision)
        else:
            recv = QuantizedAllToAll.apply(  # type: ignore[no-untyped-call]
                rows, recv_splits, send, cfg.group, cfg.traceable,
                cfg.precision)
        if layout is not None:
            recv = recv.index_select(0, layout.expand)
            wire = None if wire is None else wire.index_select(0, layout.expand)
        return recv, wire

    def combine(self, back: torch.Tensor, r: DeviceRouting, cfg: PassConfig,
                out: torch.Tensor) -> None:
        recv = self.last_recv.get(id(r), self.wire_splits(r)[1])
        layout = self.layouts.get(id(r))
        if layout is None:
            returned = AllToAll.apply(  # type: ignore[no-untyped-call]
                back, r.send_splits, recv, cfg.group, cfg.traceable)
            out.index_add_(0, r.token, returned * r.weight[:, None])
            return
        summed = back.new_zeros((sum(recv), back.shape[1])).index_add(
            0, layout.expand, back * layout.weight[:, None])
        returned = AllToAll.apply(  # type: ignore[no-untyped-call]
            summed, layout.send, recv, cfg.group, cfg.traceable)
        out.index_add_(0, layout.unique_token, returned)


def make_exchange(mode: str, dedup: bool, group: Any, device: torch.device) -> Exchange | None:
    """None for the static exchange, and for one rank without a group (nothing leaves)."""
    if group is None or (mode == "static" and not dedup):
        return None
    return Exchange(mode == "dynamic", dedup, group, device)
