"""Test-only: ``MOESCOPE_SLOW_CEILINGS="SECONDS,PATH"`` slows the runner's ceiling pass:
each rank's GEMM ceilings (``runner.ceilings.measure_gpu``) first create ``PATH.RANK``
and sleep SECONDS, a window in which a test signals the run. The runner never reads
the variable: tests/site/sitecustomize.py calls ``install`` in every interpreter a test
starts with ``site_hooks.env_with_site``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

ENV = "MOESCOPE_SLOW_CEILINGS"


def install() -> None:
    value = os.environ.get(ENV)
    if not value:
        return
    seconds, marker = value.split(",", 1)
    import torch.distributed as dist

    from runner import ceilings  # before runner.launch imports measure_gpu from it

    measure = ceilings.measure_gpu

    def slow(*args: Any, **kwargs: Any) -> Any:
        Path(f"{marker}.{dist.get_rank()}").touch()
        time.sleep(float(seconds))
        return measure(*args, **kwargs)

    ceilings.measure_gpu = slow
