"""Two reports side by side: cases matched by id, changes over the threshold marked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.figures import Case

CHANGE_THRESHOLD_PERCENT = 5.0

COMPARED: tuple[tuple[str, str, bool], ...] = (
    # field, label, higher is better
    ("layerMS", "layer time ms", False),
    ("usefulTFPerGPU", "useful TFLOP/s", True),
    ("percentOfPeak", "% of peak", True),
    ("allocatedPeakGiB", "allocated peak GiB", False),
)


@dataclass
class Change:
    base: float | None
    head: float | None
    percent: float | None
    verdict: str  # "regression", "improvement", "" (within the threshold or not comparable)


@dataclass
class Comparison:
    rows: list[dict[str, Any]] = field(default_factory=list)
    only_base: list[str] = field(default_factory=list)
    only_head: list[str] = field(default_factory=list)


def change(base: float | None, head: float | None, higher_is_better: bool) -> Change:
    if base is None or head is None or base == 0:
        return Change(base, head, None, "")
    percent = (head - base) / abs(base) * 100.0
    verdict = ""
    if abs(percent) > CHANGE_THRESHOLD_PERCENT:
        better = percent > 0 if higher_is_better else percent < 0
        verdict = "improvement" if better else "regression"
    return Change(base, head, percent, verdict)


def compare(base: Sequence[Case], head: Sequence[Case]) -> Comparison:
    """Cases matched by id; per case the change of each compared field."""
    head_by_id = {c["id"]: c for c in head}
    base_ids = {c["id"] for c in base}
    result = Comparison(
        only_base=[c["id"] for c in base if c["id"] not in head_by_id],
        only_head=[c["id"] for c in head if c["id"] not in base_ids],
    )
    for case in base:
        other = head_by_id.get(case["id"])
        if other is None:
            continue
        changes = {name: change(case.get(name), other.get(name), better)
                   for name, _, better in COMPARED}
        result.rows.append({"id": case["id"], "changes": changes})
    return result


def verdicts(row: dict[str, Any]) -> set[str]:
    return {c.verdict for c in row["changes"].values()}


def ranked(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Regressions first, then improvements, then the rest (report order within each)."""
    def rank(row: dict[str, Any]) -> int:
        found = verdicts(row)
        return 0 if "regression" in found else 1 if "improvement" in found else 2

    return sorted(rows, key=rank)


def summary_text(result: Comparison) -> str:
    # Cases, not changed fields: one slower case is also lower in throughput and % of peak,
    # and "3 regressions" for it read as three regressed cases.
    found = [verdicts(r) for r in result.rows]
    regressions = sum(1 for v in found if "regression" in v)
    improvements = sum(1 for v in found if "improvement" in v)
    return (f"{len(result.rows)} matched case(s); {regressions} with a regression and "
            f"{improvements} with an improvement over {CHANGE_THRESHOLD_PERCENT:g} %.")


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def change_text(change: Change) -> str:
    """A change as its cell shows it: 'base → head (+x.x %)', or n/a."""
    if change.base is None or change.head is None:
        return "n/a"
    values = f"{_number(change.base)} → {_number(change.head)}"
    return values if change.percent is None else f"{values} ({change.percent:+.1f} %)"
