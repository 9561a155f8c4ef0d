"""Why a case's time moved: which phase moved most, and whether the GPU ran differently.

Pure functions over the wire's ``phaseMS`` and ``gpuState`` of a case measured twice (a base
and a head). The phases are ranked by how many milliseconds each moved, not by percent: a
route phase of a few microseconds can move 50 % and explain nothing of the layer time.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PHASES = ("route", "dispatch", "experts", "combine")
# A clock reading moves a little between runs (boost bins, sampling): below this it is not
# named. Throttle reasons are named whenever the head shows one the base did not.
CLOCK_CHANGE_PERCENT = 3.0


@dataclass(frozen=True)
class PhaseChange:
    phase: str
    base_ms: float
    head_ms: float

    @property
    def delta_ms(self) -> float:
        return self.head_ms - self.base_ms

    @property
    def percent(self) -> float:
        return self.delta_ms / self.base_ms * 100

    def text(self) -> str:
        # round() to an int: no "-0 %" for a phase that moved a hair.
        return f"{self.phase} {round(self.percent):+d} %"


@dataclass(frozen=True)
class Attribution:
    # Every phase both sides timed, the one that moved most (in ms) first.
    phases: list[PhaseChange] = field(default_factory=list)
    # GPU-state changes in words ("SM clock min 1965 -> 1410 MHz (-28 %)", "throttled: ...").
    gpu_state: list[str] = field(default_factory=list)

    @property
    def top_phase(self) -> str | None:
        return self.phases[0].phase if self.phases else None

    def text(self) -> str:
        """One line: 'combine +31 %, experts +1 %, dispatch -0 %; SM clock ...', or ''."""
        parts = []
        if self.phases:
            parts.append(", ".join(p.text() for p in self.phases))
        parts.extend(self.gpu_state)
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "text": self.text(),
            "topPhase": self.top_phase,
            "phases": [{"phase": p.phase, "baseMS": p.base_ms, "headMS": p.head_ms,
                        "changePercent": p.percent} for p in self.phases],
            "gpuState": list(self.gpu_state),
        }


def phase_changes(base: Mapping[str, Any] | None,
                  head: Mapping[str, Any] | None) -> list[PhaseChange]:
    """The phases both sides timed, the largest move in ms first."""
    if not base or not head:
        return []
    changes = [PhaseChange(p, float(base[p]), float(head[p])) for p in PHASES
               if base.get(p) and head.get(p) is not None]
    return sorted(changes, key=lambda c: abs(c.delta_ms), reverse=True)


def gpu_state_changes(base: Mapping[str, Any] | None,
                      head: Mapping[str, Any] | None) -> list[str]:
    """What the head's GPU did differently: lower clocks, new throttle reasons."""
    if not head:
        return []
    found = []
    if base:
        for key, label in (("smClockMinMHz", "SM clock min"), ("smClockMaxMHz", "SM clock max")):
            before, after = base.get(key), head.get(key)
            if not before or after is None:
                continue
            percent = (after - before) / before * 100
            if abs(percent) >= CLOCK_CHANGE_PERCENT:
                found.append(f"{label} {before:.0f} -> {after:.0f} MHz ({round(percent):+d} %)")
    seen = set((base or {}).get("throttleReasonNames") or [])
    new = [name for name in head.get("throttleReasonNames") or [] if name not in seen]
    if new:
        found.append("throttled: " + ", ".join(new))
    return found


@dataclass(frozen=True)
class Measured:
    """What attribution reads of one measurement of a case (or of a baseline of several):
    its ``phaseMS`` and its ``gpuState``, as the wire names them."""

    phases: Mapping[str, float] | None
    gpu_state: Mapping[str, Any] | None

    @classmethod
    def of(cls, case: Mapping[str, Any]) -> Measured:
        """From a case as the wire has it."""
        return cls(case.get("phaseMS"), case.get("gpuState"))


def attribute(base: Measured, head: Measured) -> Attribution:
    """Why ``head`` differs from ``base``, the same case."""
    return Attribution(phase_changes(base.phases, head.phases),
                       gpu_state_changes(base.gpu_state, head.gpu_state))


def median_phases(cases: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """The median of each phase over earlier measurements of a case (a history baseline),
    over those that timed it; None when none did."""
    timed = [c["phaseMS"] for c in cases if c.get("phaseMS")]
    if not timed:
        return None
    return {p: statistics.median(t[p] for t in timed if t.get(p) is not None)
            for p in PHASES if any(t.get(p) is not None for t in timed)}
