"""Numbered points: on the scatter charts (roofline, intensity, scaling) each case's marker
carries a small number, and a key beside the chart maps numbers to case ids, so a printed
page, where nothing hovers, still says which point is which case."""

from __future__ import annotations

from collections.abc import Sequence

from app.case_view import CaseView
from app.figures.style import Trace

# Small and grey: the numbers must not outweigh the markers they name.
LABEL_FONT = {"size": 9, "color": "#374151"}


def point_numbers(cases: Sequence[CaseView]) -> dict[str, int]:
    """Case id -> its number, 1-based in view order: the same list gives every keyed chart
    and the key the same numbers."""
    return {c.id: i for i, c in enumerate(cases, start=1)}


def point_key(cases: Sequence[CaseView]) -> tuple[tuple[int, str], ...]:
    """The key: (number, case id) in number order."""
    return tuple((n, case_id) for case_id, n in point_numbers(cases).items())


def numbered(trace: Trace, numbers: Sequence[int | None]) -> Trace:
    """The trace with each point's number drawn above its marker (lines kept)."""
    mode = str(trace.get("mode") or "markers")
    return {**trace, "mode": mode if "text" in mode else f"{mode}+text",
            "text": [str(n) if n is not None else "" for n in numbers],
            "textposition": "top center", "textfont": LABEL_FONT}


def numbers_of(group: Sequence[CaseView | None], numbers: dict[str, int]) -> list[int | None]:
    """The numbers of a trace's points (``None`` for a gap between lines)."""
    return [None if c is None else numbers.get(c.id) for c in group]
