"""The runner's own coordination on gloo side groups, beside the groups the layer's
collectives run on.

Agreements (OOM and failure codes, graph capture, warm-up counts), barriers and the
gather of each case's results go through a gloo group with CPU tensors. With NCCL, a
collective whose peer died never returns to Python (the watchdog ends the process after
the group's timeout): on gloo the dead peer's closed connection raises a RuntimeError at
once, and the run can write its ``runFailureNote``. On the CPU the main groups are gloo
too; the side groups still exist and carry the same calls, so the tests run this path.

Ranks outside a case's EP wait for it at the end-of-case barrier as long as the case
runs: that one barrier gets ``CASE_WAIT_S``, not the group's timeout (a dead peer still
ends it at once, through its closed connection).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import torch
import torch.distributed as dist

CASE_WAIT_S = 3600.0  # the longest a rank outside a case waits for it to end

_SIDES: dict[Any, Any] = {}  # main group (None: the default group) -> its gloo side group


def make_side_groups(groups: dict[int, Any], world: int, timeout: dt.timedelta) -> None:
    """A gloo group beside the world and beside each EP group in ``groups`` (every rank
    calls this, in the same order, as ``new_group`` requires)."""
    _SIDES.clear()
    _SIDES[None] = dist.new_group(backend="gloo", timeout=timeout)
    for ep in sorted(groups):
        group = groups[ep]
        if group is None:
            continue
        if ep == world:
            _SIDES[group] = _SIDES[None]
        else:
            _SIDES[group] = dist.new_group(list(range(ep)), backend="gloo", timeout=timeout)


def side(group: Any) -> Any:
    """The gloo side group of ``group`` (None or WORLD: the world's). A group without one
    (ranks a test or bench script set up without ``make_side_groups``) carries the calls
    itself (``_on``)."""
    if group is None or group is dist.group.WORLD:
        return _SIDES.get(None, dist.group.WORLD)
    return _SIDES.get(group, group)


def all_reduce_ints(values: list[int], group: Any, op: Any = dist.ReduceOp.SUM) -> list[int]:
    """``values`` reduced over ``group``'s ranks, on its side group."""
    gloo = side(group)
    tensor = torch.tensor(values, dtype=torch.int64, device=_on(gloo))
    dist.all_reduce(tensor, op=op, group=gloo)
    return [int(v) for v in tensor.cpu()]


def _on(group: Any) -> torch.device:
    """Where ``group``'s tensors live: the CPU, unless it is a group without a side group
    on NCCL (then this rank's GPU)."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def barrier(group: Any = None) -> None:
    dist.barrier(group=side(group))


def wait_for_case() -> None:
    """The end-of-case barrier of every rank of the launch: the ranks outside the case
    wait while it runs, up to ``CASE_WAIT_S``."""
    dist.monitored_barrier(group=side(None), timeout=dt.timedelta(seconds=CASE_WAIT_S),
                           wait_all_ranks=True)


def broadcast_flag(flag: bool) -> bool:
    gloo = side(None)
    tensor = torch.tensor([int(flag)], dtype=torch.int64, device=_on(gloo))
    dist.broadcast(tensor, src=0, group=gloo)
    return bool(tensor.item())


def all_gather_bytes(data: bytes, group: Any) -> list[bytes]:
    """Every rank's ``data`` over ``group``, on its side group."""
    gloo = side(group)
    payload = torch.tensor(list(data), dtype=torch.uint8, device=_on(gloo))
    size = torch.tensor([payload.numel()], dtype=torch.int64, device=payload.device)
    world = dist.get_world_size(gloo)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size, group=gloo)
    longest = int(max(int(s) for s in sizes))
    padded = torch.zeros(longest, dtype=torch.uint8, device=payload.device)
    padded[:payload.numel()] = payload
    chunks = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(chunks, padded, group=gloo)
    return [bytes(c[:int(n)].cpu().tolist()) for c, n in zip(chunks, sizes, strict=True)]
