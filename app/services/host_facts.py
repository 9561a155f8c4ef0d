"""A report's host and software facts (``meta.host``, as moescope's runner records it), as
its page and its export show them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# meta.host keys in the order a person reads them, with their labels; other keys follow.
HOST_FIELDS = (("hostname", "host"), ("driver", "driver"), ("cuda", "CUDA"),
               ("torch", "torch"), ("nccl", "NCCL"), ("worldSize", "world size"),
               ("gpuCount", "GPUs"), ("python", "Python"), ("backend", "backend"))
NO_HOST = "host and software not reported (no meta.host)"


def host_facts(meta: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """(label, value) of every fact in ``meta.host`` (a value the runner could not read,
    null, is shown as "unknown" rather than dropped)."""
    host = meta.get("host")
    if not isinstance(host, Mapping):
        return ()
    known = dict(HOST_FIELDS)
    keys = [k for k, _ in HOST_FIELDS if k in host] + [str(k) for k in host if k not in known]
    return tuple((known.get(k, k), "unknown" if host[k] is None else str(host[k]))
                 for k in keys)
