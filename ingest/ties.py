"""Which result is best, and which are tied with it within noise (DESIGN.md, "Derived
metrics": ties). One rule for every "best" moescope names: the matrix, the summary, the
reports list and the platforms view."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

# A case caveated so is a data error or no result: it is never anyone's best.
NEVER_BEST = frozenset({"above_peak", "numerical_not_accepted", "failed"})

Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class Scored:
    """One result of one metric: its value, its noise in percent (the case's
    windowSpreadPercent, or its history's noise where one exists; None: unknown, taken as
    0) and its caveat codes."""

    value: float
    noise_percent: float | None = None
    caveats: frozenset[str] = frozenset()


def may_be_best(caveats: Iterable[str]) -> bool:
    return not NEVER_BEST.intersection(caveats)


def tied(a: Scored, b: Scored) -> bool:
    """|a - b| / max(|a|, |b|) <= the larger of their noises / 100."""
    top = max(abs(a.value), abs(b.value))
    if top == 0:
        return True
    noise = max(a.noise_percent or 0.0, b.noise_percent or 0.0)
    return abs(a.value - b.value) / top <= noise / 100.0


@dataclass(frozen=True)
class Best:
    index: int  # the best result's position in the sequence given
    ties: tuple[int, ...]  # every eligible position tied with it, the best included, in order

    @property
    def tied(self) -> bool:
        return len(self.ties) > 1


def best_of(results: Sequence[Scored | None], better: Better, *,
            at_least: int = 1) -> Best | None:
    """The best eligible result and those tied with it; None when fewer than ``at_least``
    results are eligible (the matrix asks for two: one cell alone is best of nothing)."""
    eligible = [(i, r) for i, r in enumerate(results)
                if r is not None and may_be_best(r.caveats)]
    if not eligible or len(eligible) < at_least:
        return None
    pick = max if better == "higher" else min
    index, top = pick(eligible, key=lambda pair: pair[1].value)
    return Best(index, tuple(i for i, r in eligible if i == index or tied(r, top)))
