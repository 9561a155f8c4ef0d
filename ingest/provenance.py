"""Where and with what software a report was measured (``meta.host`` as the runner writes
it), and how that changed between two reports: what history marks ("driver 580.95 ->
580.159"). Pure; the stored ``reports.provenance`` key is ``provenance_key`` of the meta."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

# meta.host keys, named as people say them, in the order a change is told.
FIELDS = {"driver": "driver", "cuda": "CUDA", "torch": "torch", "nccl": "NCCL",
          "python": "Python", "hostname": "host", "worldSize": "world size",
          "gpuCount": "GPUs", "backend": "backend"}


def provenance(meta: Mapping[str, Any]) -> dict[str, str]:
    """The report's provenance: each known ``meta.host`` field given, as text."""
    host = meta.get("host")
    if not isinstance(host, Mapping):
        return {}
    return {key: str(host[key]) for key in FIELDS if host.get(key) is not None}


def provenance_key(meta: Mapping[str, Any]) -> str:
    """``provenance`` as a short stable id: equal keys, same provenance."""
    text = json.dumps(provenance(meta), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Each provenance field that differs, named: ["driver 580.95 -> 580.159", ...]."""
    old, new = provenance(before), provenance(after)
    return [f"{label} {old.get(key, 'none')} -> {new.get(key, 'none')}"
            for key, label in FIELDS.items() if old.get(key) != new.get(key)]
