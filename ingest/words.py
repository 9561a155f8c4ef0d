"""Counts in words, as every screen, export and message says them."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 case``, ``9 cases``, ``0 regressions``: the noun agrees with its count."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
