"""One case's ``gpuState`` from its ranks' NVML samples (``runner.gpustate.summary``),
or the reason there is none. Torch-free."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ingest.derived import clock_event_names

if TYPE_CHECKING:
    from runner.report import RankOutcome


def gpu_state_fields(outcomes: list[RankOutcome]) -> dict[str, Any]:
    state = merge_gpu_states([o.gpu_state for o in outcomes])
    if state is not None:
        return {"gpuState": state, "gpuStateReason": None}
    reasons = [f"rank {o.rank}: {o.gpu_state_reason}" for o in outcomes if o.gpu_state_reason]
    reason = (outcomes[0].gpu_state_reason if len({o.gpu_state_reason for o in outcomes}) == 1
              else "; ".join(reasons))
    return {"gpuState": None, "gpuStateReason": reason or "no GPU state was sampled"}


def merge_gpu_states(states: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One case's ``gpuState`` over its ranks: the widest clock range, the lowest rank's
    median SM clock, the highest power and temperature, every reason any rank saw, power
    capped or clocks locked on any rank (locked unknown if some rank could not say and
    none was locked); null unless every rank has one."""
    known = [s for s in states if s is not None]
    if not known or len(known) < len(states):
        return None
    bits = 0
    for s in known:
        bits |= int(s["throttleReasons"])
    merged: dict[str, Any] = {
        "smClockMinMHz": min(s["smClockMinMHz"] for s in known),
        "smClockMaxMHz": max(s["smClockMaxMHz"] for s in known),
        "powerMaxW": max(s["powerMaxW"] for s in known),
        "temperatureMaxC": max(s["temperatureMaxC"] for s in known),
        "throttleReasons": bits,
        "throttleReasonNames": clock_event_names(bits),
        "samples": sum(int(s["samples"]) for s in known),
    }
    medians = [s.get("smClockMedianMHz") for s in known]
    if all(m is not None for m in medians):
        merged["smClockMedianMHz"] = min(medians)  # type: ignore[type-var]  # the slowest GPU's
    if all("powerCapped" in s for s in known):
        merged["powerCapped"] = any(s["powerCapped"] for s in known)
    locked = [s.get("clocksLocked") for s in known]
    if "clocksLocked" in known[0]:
        merged["clocksLocked"] = (True if any(locked) else
                                  False if all(v is False for v in locked) else None)
    return merged
