"""Flagged cases grouped by the dimensions they share, so that eighteen cases of one cause
read as one line ("9 inference nvfp4 mega cases: +15 % to +19 %").

Cases are split by verdict, then by mode x precision x pipeline (the report page's grouping:
one kernel path); a group is named by every dimension all of its cases share, so all-EP64
regressions read "... EP64" in each kernel path's line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# In the order a group's name lists them.
DIMENSIONS = ("mode", "precision", "pipeline", "category", "ep", "F", "imbalance")
PARTITION = ("mode", "precision", "pipeline")


@dataclass(frozen=True)
class Flagged:
    """One flagged case: its dimensions (a case as the wire has it), verdict and change."""

    case: Mapping[str, Any]
    status: str
    change_percent: float


@dataclass(frozen=True)
class Group:
    status: str
    shared: dict[str, Any]  # dimension -> the value every case of the group has
    case_ids: list[str]
    low_percent: float
    high_percent: float
    # How many cases of the compared set have the shared values (flagged or not), if known.
    of_total: int | None = None

    @property
    def label(self) -> str:
        return dimension_label(self.shared)

    def text(self) -> str:
        count = len(self.case_ids)
        of = f" of {self.of_total}" if self.of_total and self.of_total != count else ""
        span = (f"{self.low_percent:+.1f} %" if round(self.low_percent, 1) == round(
            self.high_percent, 1) else f"{self.low_percent:+.1f} % to {self.high_percent:+.1f} %")
        noun = "case" if count == 1 and not of else "cases"
        name = f" {self.label}" if self.label else ""
        return f"{count}{of}{name} {noun}: {span} ({self.status})"


def dimension_label(shared: Mapping[str, Any]) -> str:
    prefixes = {"ep": "EP", "F": "F", "imbalance": "i"}
    return " ".join(
        f"{prefixes.get(d, '')}{shared[d]:g}" if isinstance(shared[d], float)
        else f"{prefixes.get(d, '')}{shared[d]}"
        for d in DIMENSIONS if d in shared)


def shared_dimensions(cases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Each dimension every one of the cases has the same value of, that value."""
    first = cases[0]
    return {d: first.get(d) for d in DIMENSIONS
            if first.get(d) is not None and all(c.get(d) == first.get(d) for c in cases)}


def _matching(population: Sequence[Mapping[str, Any]], shared: Mapping[str, Any]) -> int:
    return sum(1 for c in population if all(c.get(d) == v for d, v in shared.items()))


def _group(status: str, members: Sequence[Flagged],
           population: Sequence[Mapping[str, Any]] | None) -> Group:
    shared = shared_dimensions([m.case for m in members])
    changes = [m.change_percent for m in members]
    return Group(status, shared, [str(m.case["id"]) for m in members], min(changes),
                 max(changes), _matching(population, shared) if population else None)


def group_flagged(flagged: Sequence[Flagged],
                  population: Sequence[Mapping[str, Any]] | None = None) -> list[Group]:
    """Regressions first, then improvements; within each, the largest group first.
    ``population`` (every case compared) lets a group say "9 of 12"."""
    groups: list[Group] = []
    for status in ("regression", "improvement"):
        members = [f for f in flagged if f.status == status]
        if not members:
            continue
        parts: dict[tuple[Any, ...], list[Flagged]] = {}
        for m in members:
            parts.setdefault(tuple(m.case.get(d) for d in PARTITION), []).append(m)
        found = [_group(status, part, population) for part in parts.values()]
        groups.extend(sorted(found, key=lambda g: -len(g.case_ids)))
    return groups
