"""Test-only: out-of-memory errors injected into the runner's guarded expert work.

``MOESCOPE_INJECT_OOM="rank=R,case=SUBSTRING,phase=NAME[,pass=P]"`` (several joined by
``;``): the guarded work of that rank, phase and matching case id raises OutOfMemoryError,
in the experts' forward (``pass=forward``, the default) or in autograd's backward of the
experts (``pass=backward``, training phases). The runner never reads this variable:
tests/site/sitecustomize.py calls ``install`` in every interpreter a test starts with
``env_with_injection`` (the ``moescope run`` process and each rank it spawns).
"""

from __future__ import annotations

import os

from site_hooks import env_with_site

ENV = "MOESCOPE_INJECT_OOM"


def parse(value: str) -> list[dict[str, str]]:
    specs = []
    for spec in value.split(";"):
        fields = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
        if fields:
            specs.append(fields)
    return specs


def install() -> None:
    """Set runner.oom.INJECT from MOESCOPE_INJECT_OOM (nothing when it is unset)."""
    value = os.environ.get(ENV)
    if not value:
        return
    from runner import oom

    specs = parse(value)

    def injected(state: oom.OomState, backward: bool) -> str | None:
        wanted = "backward" if backward else "forward"
        for fields in specs:
            if (fields.get("rank") == str(state.rank) and fields.get("phase") == state.phase
                    and fields.get("pass", "forward") == wanted
                    and fields.get("case", "") in state.case_id):
                return (f"injected by {ENV} (rank {state.rank}, phase {state.phase}, "
                        f"{wanted} pass)")
        return None

    oom.INJECT = injected


def env_with_injection(value: str) -> dict[str, str]:
    return env_with_site({**os.environ, ENV: value})
