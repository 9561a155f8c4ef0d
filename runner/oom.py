"""Out-of-memory and other failures, handled so that the ranks' collectives stay matched.

A case runs in phases (timings, numerical check, NVLink loop). Inside a phase, the local
work between two collectives (the experts of a routed pass, forward and backward: see
``runner.layer.expert_rows``) runs through ``guarded``: an OutOfMemoryError there is
caught, remembered, and the rank hands zeros of the right shapes to the next collective
(in the backward: zero gradients to the transposed dispatch), so its peers never wait in
a collective it skipped. After each phase the ranks all-reduce their OOM counts
(``agree``): if any rank ran out of memory, every rank drops that phase's measurement and
the rest of the case, frees memory, and goes on to the next case together.

Any other exception in the guarded work (a scaled GEMM rejecting a shape on one rank) is
handled the same way: remembered as the rank's ``failure`` (what, where), zeros go on, and
after the phase the ranks agree on it like an OOM (``runner.execute``), the case recording
its ``failure``.

An OutOfMemoryError or other exception outside the guarded work (the permutations,
quantization and weighted sum around the collectives, forward or backward) is caught at
the phase boundary only; its peers may then wait in their next collective until the
process group's timeout (``[timing] timeout_s``), a limitation stated in the README.
The agreements run on the gloo side group (``runner.side``).

Tests inject an OOM or another error by adding to ``INJECTORS`` (tests/injection.py
does, in every rank of the runs they start); the runner itself
never adds one.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from runner.side import all_reduce_ints

T = TypeVar("T")


@dataclass
class OomState:
    rank: int = 0
    case_id: str = ""
    phase: str = ""
    hit: bool = False  # this rank ran out of memory in the current phase
    failure: str | None = None  # another exception in the current phase: type and message


STATE = OomState()


# Test-only hooks: given the rank's state and whether the guarded work is a backward pass,
# the exception to raise there, or None. Empty in real runs.
Injector = Callable[[OomState, bool], BaseException | None]
INJECTORS: list[Injector] = []


def describe(exc: BaseException) -> str:
    """An exception as a case's ``failure`` names it: type and (first 300 chars of) message."""
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def guarded(work: Callable[[], T], like: Callable[[], T], backward: bool = False) -> T:
    """``work()``, or ``like()`` (zeros of the same shapes, cheap) once this rank has run
    out of memory or failed in the current phase. ``backward``: the work is a backward
    pass (for the injection's ``pass``)."""
    if not STATE.hit and STATE.failure is None:
        try:
            for inject in INJECTORS:
                injected = inject(STATE, backward)
                if injected is not None:
                    raise injected
            return work()
        except torch.OutOfMemoryError:
            STATE.hit = True
            free_memory()
        except Exception as exc:  # noqa: BLE001 - any failure: the peers must not wait
            STATE.failure = describe(exc)
    return like()


def start_phase(phase: str) -> None:
    STATE.phase, STATE.hit, STATE.failure = phase, False, None


def agree(local_ooms: int, group: Any, device: torch.device) -> list[int]:
    """Every rank's OOM count for the phase just ended (the same list on every rank)."""
    if group is None:
        return [local_ooms]
    counts = [0] * dist.get_world_size(group)
    counts[dist.get_rank(group)] = local_ooms
    return all_reduce_ints(counts, group)  # on the gloo side group: a dead peer raises


def free_memory() -> None:
    gc.collect()
    # Emptying the cache is illegal while a CUDA graph is being captured.
    if torch.cuda.is_available() and not torch.cuda.is_current_stream_capturing():
        torch.cuda.empty_cache()
