"""Per-phase times of a case, in a second pass after the layer's own timings: dispatch,
experts and combine, each timed on its own the way DeepEP times dispatch and combine
(the same windows as the layer, each after a barrier, the maximum over ranks per window,
the median of the windows), and the bytes each rank received in the two collectives.

The pass runs the case's pipeline formats (dispatch on the wire, expert groups, GEMMs;
``runner.pipelines.pass_config``) eagerly, in one stage and without CUDA graphs, with
the same experts as the layer (weights as the layer holds them). Training cases time the
phases of the forward pass. Routing is decided on the host before the case and is not
timed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from runner.layer import Experts, combine, dispatch_wire, expert_rows
from runner.matrix import Timing
from runner.pipelines import BuildContext, one_stage_routing, pass_config
from runner.quant import pack_rows
from runner.timing import time_windows

PHASES = ("dispatch", "experts", "combine")

@dataclass(frozen=True)
class PhaseTimes:
    windows: dict[str, list[float]]  # per phase, per window (already the max over ranks)
    dispatch_bytes: int  # received by this rank
    combine_bytes: int


def wire_row_bytes(precision: str, quantized: bool, width: int, dtype: torch.dtype) -> int:
    """Bytes of one dispatched row on the wire: the packed quantized row, or the row."""
    if not quantized:
        return width * torch.empty((), dtype=dtype).element_size()
    return int(pack_rows(torch.ones(1, width), precision).shape[1])


def time_phases(ctx: BuildContext, pipeline: str, experts: Experts, x: torch.Tensor,
                timing: Timing, flush: Callable[[], None] | None) -> PhaseTimes:
    cfg = pass_config(ctx, pipeline)
    r = one_stage_routing(ctx, cfg)
    out = torch.zeros_like(x)
    with torch.no_grad():
        received, wire = dispatch_wire(x, r, cfg)
        computed = expert_rows(received, r, experts, cfg, wire)
        work = {
            "dispatch": lambda: dispatch_wire(x, r, cfg),
            "experts": lambda: expert_rows(received, r, experts, cfg, wire),
            # Sums into a scratch output: the values are not looked at.
            "combine": lambda: combine(computed, r, cfg, out),
        }
        windows = {name: time_windows(fn, timing, device=ctx.device, group=ctx.group,
                                      flush=flush).per_window_ms
                   for name, fn in work.items()}
    width = x.shape[1]
    row = wire_row_bytes(ctx.precision, cfg.quantized_dispatch, width, x.dtype)
    return PhaseTimes(windows, dispatch_bytes=sum(r.recv_splits) * row,
                      combine_bytes=sum(r.send_splits) * width * x.element_size())
