"""Per-phase times of a case, in a second pass after the layer's own timings, timed the
way the layer is (``runner.timing.time_windows``: the same warm-up, windows, iterations
and L2 flush; each window after a barrier, the maximum over ranks per window, the median
of the windows) and, on CUDA, as replays of each phase's own CUDA graph where every rank
captured it (DeepEP's benchmarks time dispatch and combine alone the same way), else
eagerly.

Forward phases: ``quantize`` (quantized dispatch only: the gather of the dispatched rows,
their packing to the wire format, nvfp4's one-element all-reduce of the amax, and the
receiver's unpacking), ``dispatch`` (the all-to-all of the wire rows; bf16: with the
gather), ``experts`` (to expert order, the GEMMs, back), ``combine`` (the all-to-all home
and the weighted sum). Training adds the backward phases in the order they run: the
combine's transposed all-to-all (with the weighting), the experts' backward (gradients
of rows and weights), the dispatch's transposed all-to-all. The pass runs the case's
pipeline formats (``runner.pipelines.pass_config``) in one stage, so a staged or mega
layer's overlap is not in it: ``runner.report`` states the gap between the phases' sum
and the layer time per case.

Bytes: each rank's rows split into those that stay on it (its own experts' rows, moved by
a copy) and those that cross to another rank, both ways (sent and received); bandwidth
counts only the rows that cross. A dedup dispatch (runner.exchange) counts its rows on
the wire, one per (token, rank), in the dispatch and the combine alike.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from runner.collectives import all_to_all, group_max
from runner.experts import Experts
from runner.graphs import WARMUP, _captured, agree_on_capture
from runner.layer import DeviceRouting, PassConfig, _experts, combine, dispatch, expert_rows
from runner.matrix import Timing
from runner.pipelines import BuildContext, one_stage_routing, pass_config
from runner.quant import pack_rows, unpack_rows
from runner.timing import time_windows

FORWARD = ("quantize", "dispatch", "experts", "combine")
BACKWARD = ("combine", "experts", "dispatch")


@dataclass(frozen=True)
class RowSplit:
    """Rows a rank received in one collective: from itself, and from the other ranks."""

    local: int
    remote: int


def row_split(splits: list[int], rank: int) -> RowSplit:
    """``splits``: rows received from each source rank, this rank's own among them."""
    own = splits[rank] if rank < len(splits) else 0
    return RowSplit(own, sum(splits) - own)


@dataclass(frozen=True)
class PhaseTimes:
    forward: dict[str, list[float]]  # per phase, per window (already the max over ranks)
    forward_rank_ms: dict[str, float]  # this rank's own median per phase
    backward: dict[str, list[float]] | None  # training only
    backward_rank_ms: dict[str, float] | None
    dispatch: RowSplit  # rows this rank received in the dispatch
    combine: RowSplit  # rows this rank got back in the combine
    dispatch_sent: RowSplit  # rows this rank sent in the dispatch
    combine_sent: RowSplit  # rows it sent back in the combine (what it received)
    dispatch_row_bytes: int  # one row on the dispatch's wire
    combine_row_bytes: int
    graphs: bool | None  # every phase replayed as a CUDA graph; None: no graphs (CPU)
    note: str | None  # why a phase ran eagerly on CUDA


def wire_row_bytes(precision: str, quantized: bool, width: int, dtype: torch.dtype) -> int:
    """Bytes of one dispatched row on the wire: the packed quantized row, or the row."""
    if not quantized:
        return width * torch.empty((), dtype=dtype).element_size()
    return int(pack_rows(torch.ones(1, width), precision).shape[1])


class _Phases:
    """Each phase's work on static inputs made once, so that a phase can be captured and
    replayed on its own (its outputs are scratch: the values are not looked at)."""

    def __init__(self, x: torch.Tensor, r: DeviceRouting, cfg: PassConfig,
                 experts: Experts) -> None:
        self.x, self.r, self.cfg, self.experts = x, r, cfg, experts
        # Each phase's graph is captured on this stream (CUDA), and the experts' forward
        # whose backward is timed runs on it too: autograd runs a backward op on its
        # forward op's stream, which must be the capturing one. A dynamic dispatch's
        # host sync cannot be captured: eager.
        dynamic = cfg.exchange is not None and cfg.exchange.dynamic
        self.side = (torch.cuda.Stream(x.device) if x.device.type == "cuda" and not dynamic
                     else None)
        self.agree = group_max(cfg.group, False)
        with torch.no_grad():
            rows = x.index_select(0, r.token)
            self.sent = pack_rows(rows, cfg.precision, self.agree) if cfg.quantized_dispatch \
                else rows
            self.wire = self._send(self.sent, r.recv_splits, r.send_splits)
            self.received = (unpack_rows(self.wire, cfg.precision, x.shape[1], x.dtype)
                             if cfg.quantized_dispatch else self.wire)
            gemm_wire = self.wire if cfg.quantized_dispatch and cfg.wire_to_gemm else None
            self.gemm_wire = gemm_wire
            self.computed = expert_rows(self.received, r, experts, cfg, gemm_wire)
        self.out = torch.zeros_like(x)

    def _send(self, t: torch.Tensor, out_splits: list[int], in_splits: list[int]
              ) -> torch.Tensor:
        return all_to_all(t, out_splits, in_splits, self.cfg.group, False)

    def forward(self, training: bool) -> dict[str, Callable[[], object]]:
        cfg, r = self.cfg, self.r
        work: dict[str, Callable[[], object]] = {}
        if cfg.exchange is not None:  # the dispatcher's own exchange, quantize included
            work["dispatch"] = lambda: dispatch(self.x, r, cfg)
        elif cfg.quantized_dispatch:
            def quantize() -> None:
                packed = pack_rows(self.x.index_select(0, r.token), cfg.precision, self.agree)
                unpack_rows(packed, cfg.precision, self.x.shape[1], self.x.dtype)
            work["quantize"] = quantize
            work["dispatch"] = lambda: self._send(self.sent, r.recv_splits, r.send_splits)
        else:
            work["dispatch"] = lambda: self._send(self.x.index_select(0, r.token),
                                                  r.recv_splits, r.send_splits)

        def experts() -> None:
            # Training records the autograd graph, as the layer's forward does.
            with torch.set_grad_enabled(training):
                expert_rows(self.received, r, self.experts, cfg, self.gemm_wire)
        work["experts"] = experts
        work["combine"] = lambda: combine(self.computed, r, cfg, self.out)
        return work

    def backward(self) -> dict[str, Callable[[], object]]:
        cfg, r = self.cfg, self.r
        grad_out = torch.ones_like(self.x)
        on_side: Any = nullcontext()
        if self.side is not None:
            self.side.wait_stream(torch.cuda.current_stream(self.x.device))
            on_side = torch.cuda.stream(self.side)
        with torch.enable_grad(), on_side:
            ordered = self.received.index_select(0, r.order).detach().requires_grad_(True)
            weights = [p.detach().requires_grad_(True) for p in self.experts.parameters()]
            experts = self.experts.with_parameters(*weights)
            # Unguarded: the guard's node frees its graph after one backward; an OOM
            # here is caught by the caller's phase agreement.
            y = _experts(ordered, r, experts, cfg)
            grad_y = torch.ones_like(y)
        if self.side is not None:
            torch.cuda.current_stream(self.x.device).wait_stream(self.side)
        inputs = [ordered, *weights]

        def combine_backward() -> None:
            g = grad_out.index_select(0, r.token) * r.weight[:, None]
            self._send(g, r.recv_splits, r.send_splits)

        return {
            "combine": combine_backward,
            "experts": lambda: torch.autograd.grad(y, inputs, grad_y, retain_graph=True),
            "dispatch": lambda: self._send(grad_y, r.send_splits, r.recv_splits),
        }


def _replayable(work: Callable[[], object], side: torch.cuda.Stream | None, group: Any,
                device: torch.device) -> tuple[Callable[[], object], Any, str | None]:
    """(what to time, the graph to keep alive, why eager): the phase's own CUDA graph,
    captured on ``side``, where every rank captured it, else the eager work."""
    if side is None:
        return work, None, None
    captured, note = agree_on_capture(lambda: _captured(work, side, WARMUP), group, device)
    if captured is None:
        return work, None, note
    graph, outputs = captured
    return graph.replay, (graph, outputs), None


def _time_all(work: dict[str, Callable[[], object]], side: torch.cuda.Stream | None,
              ctx: BuildContext, timing: Timing, flush: Callable[[], None] | None,
              notes: list[str], label: str
              ) -> tuple[dict[str, list[float]], dict[str, float], bool]:
    windows, rank_ms, all_graphs = {}, {}, True
    for name, fn in work.items():
        run, keep, note = _replayable(fn, side, ctx.group, ctx.device)
        if note:
            notes.append(f"{label} {name}: {note}")
        all_graphs = all_graphs and keep is not None
        timed = time_windows(run, timing, device=ctx.device, group=ctx.group, flush=flush)
        del keep  # the graph and its pool
        windows[name] = timed.per_window_ms
        rank_ms[name] = float(statistics.median(timed.rank_ms))
    return windows, rank_ms, all_graphs


def time_phases(ctx: BuildContext, pipeline: str, experts: Experts, x: torch.Tensor,
                timing: Timing, flush: Callable[[], None] | None,
                training: bool = False) -> PhaseTimes:
    cfg = pass_config(ctx, pipeline)
    r = one_stage_routing(ctx, cfg)
    phases = _Phases(x, r, cfg, experts)
    notes: list[str] = []
    with torch.no_grad():
        forward, forward_rank, graphs = _time_all(phases.forward(training), phases.side, ctx,
                                                  timing, flush, notes, "forward")
    backward = backward_rank = None
    if training:
        backward, backward_rank, back_graphs = _time_all(phases.backward(), phases.side, ctx,
                                                         timing, flush, notes, "backward")
        graphs = graphs and back_graphs
    width = x.shape[1]
    send, recv = (cfg.exchange.wire_splits(r) if cfg.exchange is not None
                  else (r.send_splits, r.recv_splits))
    if ctx.device.type == "cuda" and phases.side is None:
        notes.append("dynamic dispatch: its count exchange syncs the host, no phase graphs")
    return PhaseTimes(
        forward, forward_rank, backward, backward_rank,
        dispatch=row_split(recv, ctx.rank), combine=row_split(send, ctx.rank),
        # The combine sends back what the dispatch delivered: under imbalance the hot
        # rank's combine sends i times the mean rows, however few it gets back.
        dispatch_sent=row_split(send, ctx.rank), combine_sent=row_split(recv, ctx.rank),
        dispatch_row_bytes=wire_row_bytes(ctx.precision, cfg.quantized_dispatch, width, x.dtype),
        combine_row_bytes=width * x.element_size(),
        graphs=graphs if ctx.device.type == "cuda" else None,
        note="; ".join(notes) or None)


def phase_outcome(times: PhaseTimes | None) -> dict[str, Any]:
    """``RankOutcome``'s phase fields (plain data) from the phase pass, None without one."""
    if times is None:
        return {}
    return {
        "phase_windows": times.forward, "phase_rank_ms": times.forward_rank_ms,
        "backward_phase_windows": times.backward, "backward_phase_rank_ms": times.backward_rank_ms,
        "dispatch_local_bytes": times.dispatch.local * times.dispatch_row_bytes,
        "dispatch_remote_bytes": times.dispatch.remote * times.dispatch_row_bytes,
        "combine_local_bytes": times.combine.local * times.combine_row_bytes,
        "combine_remote_bytes": times.combine.remote * times.combine_row_bytes,
        "dispatch_sent_remote_bytes": times.dispatch_sent.remote * times.dispatch_row_bytes,
        "combine_sent_remote_bytes": times.combine_sent.remote * times.combine_row_bytes,
        "phase_graphs": times.graphs, "phase_graph_note": times.note,
    }
