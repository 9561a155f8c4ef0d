"""One routed pass of the MoE layer: the routing on the device, dispatch, the experts
(OOM-guarded), combine.

The same code runs the measured layer (bf16, quantized by ``precision``) and its float32
reference (``precision="bf16"`` on float32 tensors: no rounding anywhere but float32's).
The collectives are in ``runner.collectives``, the experts' weights in ``runner.experts``,
their kernels in ``runner.expert_kernels``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from runner.collectives import AllToAll, QuantizedAllToAll, quantized_all_to_all
from runner.experts import ExpertFn, Experts, QuantizedWeights
from runner.native import wire_operand
from runner.oom import guarded
from runner.phase_clock import CLOCK
from runner.routing import RankRouting

GROUP_ROWS = 128


def pad_index(counts: list[int], group: int = GROUP_ROWS) -> tuple[torch.Tensor, list[int]]:
    """Where each expert-ordered row lands when every expert's group is padded to
    ``group`` rows, and the padded counts."""
    padded = [-(-n // group) * group for n in counts]
    index: list[int] = []
    start = 0
    for n, p in zip(counts, padded, strict=True):
        index.extend(range(start, start + n))
        start += p
    return torch.tensor(index, dtype=torch.int64), padded


@dataclass
class DeviceRouting:
    """A stage's routing with every index already on the device (nothing is copied from
    the host inside the step, so it can be captured in a CUDA graph)."""

    token: torch.Tensor
    weight: torch.Tensor
    order: torch.Tensor
    send_splits: list[int]
    recv_splits: list[int]
    counts: list[int]  # rows per expert as the GEMMs see them (padded or not)
    offs: torch.Tensor  # int32 cumulative counts
    pad: torch.Tensor | None  # expert-ordered row -> padded row

    @property
    def gemm_rows(self) -> int:
        return sum(self.counts)


def prepare(routing: RankRouting, device: torch.device, dtype: torch.dtype,
            pad_groups: bool) -> DeviceRouting:
    counts = routing.expert_counts
    pad = None
    if pad_groups:
        index, counts = pad_index(counts)
        pad = index.to(device)
    offs = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(torch.int32).to(device)
    return DeviceRouting(
        token=routing.send_token.to(device), weight=routing.send_weight.to(device, dtype),
        order=routing.recv_order.to(device), send_splits=routing.send_splits,
        recv_splits=routing.recv_splits, counts=counts, offs=offs, pad=pad)


@dataclass
class PassConfig:
    precision: str
    quantized_dispatch: bool
    pad_groups: bool
    expert_fn: ExpertFn
    group: Any
    traceable: bool = False  # functional collectives, for torch.compile (mega)
    # runner.dispatch.Exchange: a dynamic or deduplicating dispatch and its combine; None:
    # the static exchange below (splits known on the host)
    exchange: Any = None
    # The received wire rows go on to the experts (dispatch_wire): native GEMMs take them
    wire_to_gemm: bool = False


def _experts(ordered: torch.Tensor, r: DeviceRouting, experts: Experts, cfg: PassConfig,
             wire: torch.Tensor | None = None) -> torch.Tensor:
    """``wire``: the same rows as they came off the wire (see dispatch_wire), padded
    alike (zero bytes decode to zero)."""
    width = ordered.shape[1]
    if r.pad is not None:
        ordered = ordered.new_zeros((r.gemm_rows, width)).index_copy(0, r.pad, ordered)
        if wire is not None:
            wire = wire.new_zeros((r.gemm_rows, wire.shape[1])).index_copy(0, r.pad, wire)
    operand = None if wire is None else wire_operand(wire, cfg.precision, width)
    y = cfg.expert_fn(ordered, experts, r.counts, r.offs, cfg.precision,
                      cfg.quantized_dispatch, operand)
    return y if r.pad is None else y.index_select(0, r.pad)


def dispatch(x: torch.Tensor, r: DeviceRouting, cfg: PassConfig) -> torch.Tensor:
    """This rank's rows to their experts' ranks (quantized on the wire if so configured)."""
    x = CLOCK.into("dispatch", r, x)
    mark = CLOCK.begin("dispatch", r)
    recv = _dispatch(x, r, cfg)
    CLOCK.end(mark)
    CLOCK.out_of("dispatch", r, recv)
    return recv


def _dispatch(x: torch.Tensor, r: DeviceRouting, cfg: PassConfig) -> torch.Tensor:
    if cfg.exchange is not None:
        rows: torch.Tensor = cfg.exchange.dispatch(x, r, cfg)[0]
        return rows
    rows = x.index_select(0, r.token)
    recv: torch.Tensor
    if cfg.quantized_dispatch:
        recv = QuantizedAllToAll.apply(rows, r.recv_splits, r.send_splits, cfg.group,
                                       cfg.traceable, cfg.precision)
    else:
        recv = AllToAll.apply(rows, r.recv_splits, r.send_splits, cfg.group, cfg.traceable)
    return recv


def dispatch_wire(x: torch.Tensor, r: DeviceRouting, cfg: PassConfig
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``dispatch``, and the received wire rows too where a native GEMM takes them as its
    operand with the senders' scales (``native.wire_operand``), so they are not quantized
    again. Without gradients only: training needs ``QuantizedAllToAll``'s backward."""
    if not (cfg.wire_to_gemm and cfg.quantized_dispatch and not torch.is_grad_enabled()):
        return dispatch(x, r, cfg), None
    mark = CLOCK.begin("dispatch", r)
    received: tuple[torch.Tensor, torch.Tensor | None] = (
        cfg.exchange.dispatch(x, r, cfg) if cfg.exchange is not None else
        quantized_all_to_all(x.index_select(0, r.token), r.recv_splits, r.send_splits,
                             cfg.group, cfg.traceable, cfg.precision))
    CLOCK.end(mark)
    return received


def expert_rows(recv: torch.Tensor, r: DeviceRouting, experts: Experts, cfg: PassConfig,
                wire: torch.Tensor | None = None) -> torch.Tensor:
    """Received rows -> expert order -> experts -> back in received order. The experts are
    the local work between the two collectives, so they run OOM-guarded (forward and,
    when training, backward): a rank out of memory sends zeros on to the combine (and zero
    gradients back to the dispatch) rather than leave its peers waiting there."""
    recv = CLOCK.into("experts", r, recv)
    mark = CLOCK.begin("experts", r)
    ordered = recv.index_select(0, r.order)
    y = guarded_experts(ordered, r, experts, cfg,
                        None if wire is None else wire.index_select(0, r.order))
    back = torch.empty_like(y).index_copy(0, r.order, y)
    CLOCK.end(mark)
    CLOCK.out_of("experts", r, back)
    return back


# The guard is host code that catches an error at run time, which a compiled graph
# cannot hold: torch.compile (mega) breaks its graph here and runs this eagerly (the
# experts inside are compiled on their own, see runner.pipelines.mega_forward).
@torch.compiler.disable  # type: ignore[untyped-decorator]
def guarded_experts(ordered: torch.Tensor, r: DeviceRouting, experts: Experts,
                     cfg: PassConfig, wire: torch.Tensor | None = None) -> torch.Tensor:
    tensors = (ordered, *experts.parameters())
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        y: torch.Tensor = GuardedExperts.apply(r, cfg, experts.quantized, *tensors)
        return y
    return guarded(lambda: _experts(ordered, r, experts, cfg, wire),
                   lambda: ordered.new_zeros(ordered.shape))


class GuardedExperts(torch.autograd.Function):
    """The experts as one autograd node whose forward and backward both run ``guarded``.
    The forward records the experts' own autograd graph (under ``enable_grad``), the
    backward differentiates it: the same work as without the node, but an OOM in the
    backward is caught here and zero gradients go on to the dispatch's transposed
    collective, which every rank then still reaches."""

    @staticmethod
    def forward(ctx: Any, r: DeviceRouting, cfg: PassConfig,
                quantized: QuantizedWeights | None, ordered: torch.Tensor,
                gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
        inputs = [t.detach().requires_grad_(t.requires_grad)
                  for t in (ordered, gate, up, down)]
        experts = Experts(inputs[1], inputs[2], inputs[3], quantized)
        with torch.enable_grad():
            y = guarded(lambda: _experts(inputs[0], r, experts, cfg),
                        lambda: ordered.new_zeros(ordered.shape))
        ctx.inputs, ctx.y = inputs, y
        return y.detach()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        inputs: list[torch.Tensor] = ctx.inputs
        y: torch.Tensor = ctx.y
        ctx.inputs = ctx.y = None  # the inner graph is spent

        def zeros() -> list[torch.Tensor]:
            return [torch.zeros_like(t) for t in inputs]

        def differentiate() -> list[torch.Tensor]:
            if y.grad_fn is None:  # the forward ran out of memory: zeros, no graph
                return zeros()
            wanted = [t for t in inputs if t.requires_grad]
            found = iter(torch.autograd.grad(y, wanted, grad, allow_unused=True))
            out = []
            for t in inputs:
                g = next(found) if t.requires_grad else None
                out.append(torch.zeros_like(t) if g is None else g)
            return out

        grads = guarded(differentiate, zeros, backward=True)
        return None, None, None, *grads


def combine(back: torch.Tensor, r: DeviceRouting, cfg: PassConfig, out: torch.Tensor) -> None:
    """The expert outputs home again, score-weighted and summed into ``out``."""
    back = CLOCK.into("combine", r, back)
    mark = CLOCK.begin("combine", r)
    if cfg.exchange is not None:
        cfg.exchange.combine(back, r, cfg, out)
    else:
        returned = AllToAll.apply(back, r.send_splits, r.recv_splits, cfg.group,
                                  cfg.traceable)
        out.index_add_(0, r.token, returned * r.weight[:, None])
    CLOCK.end(mark)
    # out's node is now this stage's sum into it (every path ends with one): where the
    # combine's backward starts
    CLOCK.out_of("combine", r, out)


def routed_pass(x: torch.Tensor, r: DeviceRouting, experts: Experts, cfg: PassConfig,
                out: torch.Tensor) -> None:
    """Dispatch, permute to expert order, experts, combine, score-weighted sum into out."""
    recv, wire = dispatch_wire(x, r, cfg)
    combine(expert_rows(recv, r, experts, cfg, wire), r, cfg, out)
