"""Which results form one series: the same case, measured on the same hardware and shape.

The identity is decided here and nowhere else. Reports store ``series_context`` of their
meta, so a query compares one column; adding a field (driver or torch version from host
info) changes this function and a migration that recomputes the stored column, never the
callers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def series_fields(meta: Mapping[str, Any]) -> dict[str, Any]:
    """What a report's meta contributes to the identity of each of its cases' series."""
    shape = meta["shape"]
    return {"gpu": meta["gpu"], "T": shape["T"], "D": shape["D"], "E": shape["E"],
            "K": shape["K"]}


def series_context(meta: Mapping[str, Any]) -> str:
    """``series_fields`` as a short stable id (stored on each report, used in URLs)."""
    text = json.dumps(series_fields(meta), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
