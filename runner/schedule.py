"""The staged pipeline's schedule: which op of which stage runs when.

Each token stage goes dispatch -> experts -> combine. The schedule is a list of ticks;
in tick t the experts of stage t-1 run while the dispatch of stage t and the combine of
stage t-2 are in flight. ``run_schedule`` issues each op on its own CUDA stream, ordered
by events, so on a GPU the two transfers overlap the expert GEMMs; on the CPU it runs the
same ticks one op after the other (the same code, the same order of collectives on every
rank, which is what keeps the ranks matched).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

import torch

Phase = Literal["dispatch", "experts", "combine"]
PHASES: tuple[Phase, ...] = ("dispatch", "experts", "combine")
Op = tuple[Phase, int]  # (phase, stage)


def pipeline_schedule(stages: int) -> list[list[Op]]:
    """Ticks of ops that may run concurrently, each tick in issue order: the dispatch of
    the next stage first (the transfer that feeds the GEMMs soonest), then the combine of
    the previous stage, then the experts of the current one."""
    if stages < 1:
        raise ValueError(f"stages must be at least 1, got {stages}")
    ticks: list[list[Op]] = []
    for t in range(stages + 2):
        tick: list[Op] = []
        if t < stages:
            tick.append(("dispatch", t))
        if 0 <= t - 2 < stages:
            tick.append(("combine", t - 2))
        if 0 <= t - 1 < stages:
            tick.append(("experts", t - 1))
        ticks.append(tick)
    return ticks


def run_schedule(ticks: list[list[Op]], ops: Mapping[Phase, Callable[[int], None]],
                 device: torch.device, streams: dict[Phase, torch.cuda.Stream] | None = None
                 ) -> None:
    """Run the ops; on CUDA each phase on its stream of ``streams``, each op waiting on
    an event recorded after the previous phase of its stage. The caller's stream waits for
    all of them at the end. Tensors handed from one stream to another are the ops' own
    business (``handoff``)."""
    if device.type != "cuda" or streams is None:
        for tick in ticks:
            for phase, stage in tick:
                ops[phase](stage)
        return
    main = torch.cuda.current_stream(device)
    for stream in streams.values():
        stream.wait_stream(main)
    done: dict[Op, torch.cuda.Event] = {}
    for tick in ticks:
        for phase, stage in tick:
            stream = streams[phase]
            before = PHASES.index(phase) - 1
            if before >= 0:
                stream.wait_event(done[(PHASES[before], stage)])
            with torch.cuda.stream(stream):
                ops[phase](stage)
            event = torch.cuda.Event()  # type: ignore[no-untyped-call]
            event.record(stream)
            done[(phase, stage)] = event
    for stream in streams.values():
        main.wait_stream(stream)


def handoff(tensor: torch.Tensor, stream: torch.cuda.Stream | None) -> torch.Tensor:
    """Tell the caching allocator that ``stream`` uses ``tensor`` (made on another
    stream), so its memory is not reused before that stream is done. Needed during a
    CUDA-graph capture too: inside the graph's private pool a block freed during capture
    is handed out again at once to the next allocation on its stream (the next stage's
    dispatch), which the graph does not order after this stream's reads; a recorded use
    defers the block's reuse to after the capture."""
    if stream is not None and tensor.is_cuda:
        tensor.record_stream(stream)
    return tensor
