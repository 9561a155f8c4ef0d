"""The case page: every field of one case as text a person reads (ms, %, GiB, GB/s), the
exact value as the wire has it kept beside it."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from app.case_view import CaseView, case_record

GIB, MIB, KIB = 2**30, 2**20, 2**10


def display_value(value: Any) -> str:
    """A field's value as text, in JSON's spelling (null, true) as the wire has it."""
    if isinstance(value, float):
        return f"{value:,.6g}"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def table_number(value: int | float) -> str:
    """A number as the case table shows it on the page (static/dashAgGridComponentFunctions.js
    caseNumber: integers grouped, other numbers to 4 significant digits, no exponent), so the
    export prints what the page shows."""
    if isinstance(value, int) or value == 0 or not math.isfinite(value):
        return f"{value:,}" if isinstance(value, int) else f"{value:g}"
    digits = 3 - math.floor(math.log10(abs(value)))
    rounded = round(value, digits)
    if digits <= 0:
        return f"{rounded:,.0f}"
    return f"{rounded:,.{digits}f}".rstrip("0").rstrip(".")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def size_text(value: float) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(value) >= size:
            return f"{value / size:,.2f} {unit}"
    return f"{value:,.0f} B"


def _ms(value: float) -> str:
    return f"{value:.4g} ms"


def _list(values: Sequence[Any], one: Any) -> str:
    """A per-rank list: one value when every rank has it, else min, median and max."""
    if not values:
        return "none"
    if all(v == values[0] for v in values):
        return f"{one(values[0])} on each of {len(values)} ranks"
    ordered = sorted(values)
    return (f"{one(ordered[0])} to {one(ordered[-1])} over {len(values)} ranks "
            f"(median {one(ordered[len(ordered) // 2])})")


def _gpu_state(state: Mapping[str, Any]) -> str:
    names = ", ".join(state.get("throttleReasonNames") or []) or "none"
    return (f"SM clock {state['smClockMinMHz']:.0f}–{state['smClockMaxMHz']:.0f} MHz, "
            f"power ≤ {state['powerMaxW']:.0f} W, ≤ {state['temperatureMaxC']:.0f} °C, "
            f"throttle: {names} ({state['samples']} samples)")


def formatted(key: str, value: Any) -> str:
    """A field's value in its unit, read from the wire name's suffix (``layerMS``,
    ``arenaBytes``, ``nvlinkTXGBps``, ``allocatedPeakGiB``, ``percentOfPeak``...)."""
    if value is None:
        return "n/a"
    if key == "windows" and isinstance(value, Mapping):
        return "; ".join(f"{kind}: " + ", ".join(f"{w:.4g}" for w in ws) + " ms"
                         for kind, ws in value.items() if ws)
    if key == "phaseMS" and isinstance(value, Mapping):
        return ", ".join(f"{p} {_ms(v)}" for p, v in value.items() if _number(v))
    if key == "gpuState" and isinstance(value, Mapping) and "smClockMinMHz" in value:
        return _gpu_state(value)
    if key == "receiveRows" and isinstance(value, list):
        return _list(value, lambda v: f"{v:,} rows")
    if key.endswith("Bytes") and isinstance(value, list):
        return _list(value, size_text)
    if not _number(value):
        return display_value(value)
    if key.endswith("MS"):
        return _ms(value)
    if key.endswith("S") and key[-2:-1].islower():  # setupS, wallS, compileS: seconds
        return f"{value:,.2f} s"
    if "Bytes" in key and not key.startswith("forwardFlops"):
        return size_text(value)
    if key.endswith("GiB"):
        return f"{value:,.2f} GiB"
    if key.endswith("GBps"):
        return f"{value:,.1f} GB/s"
    if key.endswith("Percent") or key.endswith("PercentOfPeak") or key == "percentOfPeak":
        return f"{value:.1f} %"
    if key == "usefulTFPerGPU":
        return f"{value:,.1f} TFLOP/s per GPU"
    if key.startswith("forwardFlopsPerLogicalPayloadByte"):
        return f"{value:,.0f} FLOP per byte"
    if key in ("imbalance", "observedImbalance"):
        return f"{value:.3g}×"
    if key.endswith("Rows"):
        return f"{value:,} rows"
    return display_value(value)


def case_fields(case: CaseView) -> list[tuple[str, str, str]]:
    """Every wire and derived field that has a value, then those this service does not
    know, caveats apart: (name, the value in its unit, the exact value as the wire has
    it)."""
    return [(key, formatted(key, value), display_value(value))
            for key, value in case_record(case).items()]
