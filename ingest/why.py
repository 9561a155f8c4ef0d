"""The why of a change in one sentence, built once (an alert stores it; the alert page, the
API, the webhook, the markdown summary and the export show it as is):

    9 inference nvfp4 mega cases +19.2 % to +21.0 %, all in combine (+98 % to +102 %);
    nothing else moved; coincides with driver 580.95.05 → 580.159.03; last good report 6
    (2026-11-06), first bad report 7 (2026-11-07)

Pure: plain values in, text out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ReportRef:
    id: int
    date: str


@dataclass(frozen=True)
class Change:
    """What the sentence tells: ``label`` the dimensions every moved case shares
    (``ingest.grouping.dimension_label``), their change of layer time, the phase that moved
    most in each of them (None: no phase timed) and its change."""

    count: int
    label: str
    low_percent: float
    high_percent: float
    phase: str | None
    phase_low_percent: float | None
    phase_high_percent: float | None
    others_moved: int  # the report's other moved cases (in other alerts)
    provenance_changes: Sequence[str]  # ingest.provenance.changes: "driver a -> b"
    gpu_state_changes: Sequence[str]  # ingest.attribution.gpu_state_changes
    last_good: ReportRef | None
    first_bad: ReportRef


def span(low: float, high: float, digits: int = 1) -> str:
    """'+19.2 %' or '+19.2 % to +21.0 %' (one figure when both round alike)."""
    a, b = f"{low:+.{digits}f} %", f"{high:+.{digits}f} %"
    return a if a == b else f"{a} to {b}"


def _cases(change: Change) -> str:
    noun = "case" if change.count == 1 else "cases"
    label = f" {change.label}" if change.label else ""
    return f"{change.count}{label} {noun} {span(change.low_percent, change.high_percent)}"


def _in_phase(count: int, phase: str | None, low: float | None, high: float | None) -> str:
    if phase is None:
        return "no phases timed"
    where = f"all in {phase}" if count > 1 else f"in {phase}"
    return where if low is None or high is None else f"{where} ({span(low, high, 0)})"


def _phase(change: Change) -> str:
    return _in_phase(change.count, change.phase, change.phase_low_percent,
                     change.phase_high_percent)


def phase_phrase(moves: Sequence[tuple[str | None, float | None]]) -> str:
    """Where some cases moved, from each one's top phase and its change (percent):
    'all in combine (+98 % to +102 %)' when they agree, else each phase with its count
    ('in combine (5), experts (4)')."""
    phases = [p for p, _ in moves]
    if len(set(phases)) == 1:
        changes = [c for _, c in moves if c is not None]
        return _in_phase(len(moves), phases[0], min(changes, default=None),
                         max(changes, default=None))
    counts: dict[str, int] = {}
    for phase in phases:
        counts[phase or "no phase"] = counts.get(phase or "no phase", 0) + 1
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    return "in " + ", ".join(f"{name} ({n})" for name, n in ranked)


def _others(change: Change) -> str:
    if not change.others_moved:
        return "nothing else moved"
    noun = "case" if change.others_moved == 1 else "cases"
    return f"{change.others_moved} other {noun} moved too"


def _coincides(change: Change) -> str:
    named = [c.replace(" -> ", " → ") for c in
             (*change.provenance_changes, *change.gpu_state_changes)]
    if not named:
        return "no provenance or GPU state change"
    return "coincides with " + ", ".join(named)


def _reports(change: Change) -> str:
    bad = f"first bad report {change.first_bad.id} ({change.first_bad.date})"
    if change.last_good is None:
        return f"no earlier report, {bad}"
    return f"last good report {change.last_good.id} ({change.last_good.date}), {bad}"


def why_sentence(change: Change) -> str:
    """The sentence, its parts joined by semicolons."""
    return "; ".join((f"{_cases(change)}, {_phase(change)}", _others(change),
                      _coincides(change), _reports(change)))
