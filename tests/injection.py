"""Test-only: out-of-memory errors and other exceptions injected into the runner's guarded
expert work.

``MOESCOPE_INJECT_OOM="rank=R,case=SUBSTRING,phase=NAME[,pass=P]"`` (several joined by
``;``): the guarded work of that rank, phase and matching case id raises OutOfMemoryError,
in the experts' forward (``pass=forward``, the default) or in autograd's backward of the
experts (``pass=backward``, training phases). ``MOESCOPE_INJECT_ERROR``, the same format,
raises a RuntimeError there instead (what a scaled GEMM rejecting a shape raises).
``MOESCOPE_INJECT_DELAY``, the same format with ``ms=N``, raises nothing: the matching
guarded work first sleeps N ms (a phase slowed by a known time). The runner never reads
these variables: tests/site/sitecustomize.py calls ``install`` in every
interpreter a test starts with ``env_with_injection`` (the ``moescope run`` process and
each rank it spawns).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from site_hooks import env_with_site

if TYPE_CHECKING:
    from runner.oom import Injector, OomState

OOM_ENV = "MOESCOPE_INJECT_OOM"
ERROR_ENV = "MOESCOPE_INJECT_ERROR"
DELAY_ENV = "MOESCOPE_INJECT_DELAY"


def parse(value: str) -> list[dict[str, str]]:
    specs = []
    for spec in value.split(";"):
        fields = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
        if fields:
            specs.append(fields)
    return specs


def install() -> None:
    """Add an injector to runner.oom.INJECTORS for each variable that is set. Every
    interpreter a test starts with tests/site runs this and most inject nothing: torch
    and the runner are imported only when a variable is set (they cost a second a
    start-up, and a runner-only install's checks should not find torch loaded)."""
    if not any(os.environ.get(env) for env in (OOM_ENV, ERROR_ENV, DELAY_ENV)):
        return
    import torch

    from runner import oom  # the module, whose INJECTORS the runner reads

    kinds: dict[str, Callable[[str], BaseException]] = {
        OOM_ENV: torch.OutOfMemoryError, ERROR_ENV: RuntimeError}
    for env, kind in kinds.items():
        value = os.environ.get(env)
        if value:
            oom.INJECTORS.append(_injector(env, kind, parse(value)))
    delays = os.environ.get(DELAY_ENV)
    if delays:
        oom.INJECTORS.append(_delay(parse(delays)))


def _matching(specs: list[dict[str, str]], state: OomState, backward: bool
              ) -> dict[str, str] | None:
    wanted = "backward" if backward else "forward"
    for fields in specs:
        if (fields.get("rank") == str(state.rank) and fields.get("phase") == state.phase
                and fields.get("pass", "forward") == wanted
                and fields.get("case", "") in state.case_id):
            return fields
    return None


def _injector(env: str, kind: Callable[[str], BaseException], specs: list[dict[str, str]]
              ) -> Injector:
    def injected(state: OomState, backward: bool) -> BaseException | None:
        if _matching(specs, state, backward) is None:
            return None
        return kind(f"injected by {env} (rank {state.rank}, phase {state.phase}, "
                    f"{'backward' if backward else 'forward'} pass)")

    return injected


def _delay(specs: list[dict[str, str]]) -> Injector:
    def delayed(state: OomState, backward: bool) -> BaseException | None:
        fields = _matching(specs, state, backward)
        if fields is not None:
            time.sleep(float(fields["ms"]) / 1e3)
        return None

    return delayed


def env_with_injection(oom: str = "", error: str = "", delay: str = "") -> dict[str, str]:
    values = {OOM_ENV: oom, ERROR_ENV: error, DELAY_ENV: delay}
    return env_with_site({**os.environ, **{k: v for k, v in values.items() if v}})
