"""The export's footer: which moescope made the file, when, and from which stored report."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version


@dataclass(frozen=True)
class Footer:
    version: str
    generated: str  # the one field that differs between two exports of the same view
    items: list[tuple[str, str]] = field(default_factory=list)


def make_footer(sources: list[tuple[int, bytes]], now: datetime | None = None) -> Footer:
    """``sources``: each report's id and its report.json bytes, hashed as served."""
    items = []
    for report_id, payload in sources:
        items.append(("report", f"#{report_id}"))
        items.append(("source SHA-256", hashlib.sha256(payload).hexdigest()))
    generated = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Footer(version=version("moescope"), generated=generated, items=items)
