"""How a run ends when it is told to stop or loses its launcher, and ``--nproc``'s ranks.

SIGTERM or SIGINT in rank 0 raises ``Stopped`` in its ceiling pass or its case loop: the
report gets its ``runFailureNote`` and the finished cases are delivered, as when a peer
is lost (runner.launch). The other
ranks end at once on either signal (the default action): a Python handler would wait
until a blocking collective returned, while their closed gloo connections return rank 0
to Python at once.

A rank whose launching process died (torchrun's agent killed with its node still up, or
the ``--nproc`` parent) is orphaned: nothing would end it, and the other node's agent
would wait for it at torchrun's exit barrier. A watcher thread sends the rank SIGTERM
when its parent changes.

``--nproc`` starts its ranks here rather than through ``torch.multiprocessing.spawn``,
which terminates every rank as soon as one fails, rank 0 before it can write the note:
when a rank dies the others get ``grace_s`` to end on their own, then SIGTERM (rank 0
writes the note), then SIGKILL.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import torch.multiprocessing as mp

SIGNALS = (signal.SIGTERM, signal.SIGINT)
PARENT_POLL_S = 1.0
KILL_AFTER_S = 15.0  # after SIGTERM, before SIGKILL: rank 0 delivering its finished cases

_why: dict[str, str] = {}  # "parent": the launcher that died; "stop": the signal's reason
_raising = [True]  # False once the run is ending: a signal is then only recorded


class Stopped(Exception):
    """Rank 0 was told to stop (SIGTERM, SIGINT), or its launcher died."""


def install(rank: int) -> None:
    """Rank 0: the signals raise ``Stopped`` (the first one; later ones are ignored while
    the note is written). Other ranks: the default action, the process ends at once."""
    for sig in SIGNALS:
        signal.signal(sig, _raise_stopped if rank == 0 else signal.SIG_DFL)


def _raise_stopped(signum: int, _frame: Any) -> None:
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    _why["stop"] = f"Stopped: stopped by {signal.Signals(signum).name}{_why.get('parent', '')}"
    if _raising[0]:
        raise Stopped(_why["stop"])


def ending() -> str | None:
    """The run is ending (a peer lost, or a signal): later signals are only recorded, so
    that the note is written and the cases delivered. The signal's reason if one came:
    the peers end on the same signal, and rank 0 may see their closed connections before
    its own handler runs."""
    _raising[0] = False
    return _why.get("stop")


def watch_parent(what: str) -> None:
    """SIGTERM to this process when its parent (``what``: the launcher's name) dies."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        _why["parent"] = f" ({what}, pid {parent}, died)"
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="moescope-parent-watch", daemon=True).start()


def run_ranks(target: Callable[..., None], world: int, args: tuple[Any, ...],
              grace_s: float) -> int:
    """``target(rank, *args, status)`` in ``world`` spawned processes; rank 0's exit code
    (put on ``status``), or 1 when it gave none or a rank failed."""
    context = mp.get_context("spawn")
    status = context.SimpleQueue()
    procs = [context.Process(target=target, args=(rank, *args, status), daemon=False)
             for rank in range(world)]
    for proc in procs:
        proc.start()

    def forward(signum: int, _frame: Any) -> None:  # rank 0 writes the note; the rest end
        for proc in procs:
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in SIGNALS}
    try:
        _wait(procs, grace_s)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    code = int(status.get()) if not status.empty() else 1
    return code or int(any(p.exitcode for p in procs))


def _wait(procs: list[Any], grace_s: float) -> None:
    failed_at: float | None = None
    terminated_at: float | None = None
    while alive := [p for p in procs if p.is_alive()]:
        multiprocessing.connection.wait([p.sentinel for p in alive], timeout=0.5)
        now = time.monotonic()
        if failed_at is None and any(p.exitcode for p in procs):
            failed_at = now
        if failed_at is not None and terminated_at is None and now - failed_at > grace_s:
            terminated_at = now
            for proc in alive:
                proc.terminate()
        if terminated_at is not None and now - terminated_at > KILL_AFTER_S:
            for proc in alive:
                proc.kill()
    for proc in procs:
        proc.join()
