"""The layer's collectives: the differentiable all-to-all, its quantized form (rows sent in
the precision's wire format) and the group's agreed maximum (nvfp4's tensor scale)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from runner.quant import pack_rows, unpack_rows


def all_to_all(x: torch.Tensor, out_splits: list[int], in_splits: list[int],
                group: Any, traceable: bool) -> torch.Tensor:
    """``traceable``: through the functional collective (``torch.distributed.
    _functional_collectives``), which torch.compile traces into its graph; otherwise the
    in-place ``all_to_all_single`` into a preallocated buffer."""
    if group is None:  # one rank: nothing leaves
        return x.clone()
    if traceable:
        sent = funcol.all_to_all_single(x.contiguous(), out_splits, in_splits, group)
        received: torch.Tensor = funcol.wait_tensor(sent)
        return received
    out = x.new_empty((sum(out_splits), *x.shape[1:]))
    dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
    return out


class AllToAll(torch.autograd.Function):
    """Rows to their destinations; the gradient goes back the same way reversed."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, out_splits: list[int], in_splits: list[int],
                group: Any, traceable: bool) -> torch.Tensor:
        ctx.splits, ctx.group, ctx.traceable = (out_splits, in_splits), group, traceable
        return all_to_all(x, out_splits, in_splits, group, traceable)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        out_splits, in_splits = ctx.splits
        back = all_to_all(grad, in_splits, out_splits, ctx.group, ctx.traceable)
        return back, None, None, None, None


def quantized_all_to_all(x: torch.Tensor, out_splits: list[int], in_splits: list[int],
                          group: Any, traceable: bool, precision: str
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows quantized to the precision's wire format (data and scales as uint8), sent:
    (the received rows dequantized, the received wire rows). nvfp4's tensor scale is
    agreed over the group first (a one-element all-reduce of the amax), so every row a
    rank receives shares one and a native GEMM takes them as they are."""
    wire = all_to_all(pack_rows(x, precision, group_max(group, traceable)),
                       out_splits, in_splits, group, traceable)
    return unpack_rows(wire, precision, x.shape[-1], x.dtype), wire


def group_max(group: Any, traceable: bool) -> Callable[[torch.Tensor], torch.Tensor] | None:
    if group is None:  # one rank: its own amax
        return None

    def agree(x: torch.Tensor) -> torch.Tensor:
        if traceable:
            reduced: torch.Tensor = funcol.wait_tensor(funcol.all_reduce(x, "max", group))
            return reduced
        out = x.clone()
        dist.all_reduce(out, op=dist.ReduceOp.MAX, group=group)
        return out

    return agree


class QuantizedAllToAll(torch.autograd.Function):
    """Forward: rows quantized to the precision's wire format (data and scales as
    uint8), sent, dequantized. Backward: the gradient returns in the rows' dtype."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, out_splits: list[int], in_splits: list[int],
                group: Any, traceable: bool, precision: str) -> torch.Tensor:
        ctx.splits, ctx.group, ctx.traceable = (out_splits, in_splits), group, traceable
        return quantized_all_to_all(x, out_splits, in_splits, group, traceable, precision)[0]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        out_splits, in_splits = ctx.splits
        back = all_to_all(grad, in_splits, out_splits, ctx.group, ctx.traceable)
        return back, None, None, None, None, None
