"""Traces of per-case charts: one scatter trace per (precision, pipeline), its hover text
from a single template per trace."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from app.case_view import CaseView
from app.figures.configuration import placement
from app.figures.style import Trace, grouped, marker, series_name, text


def hover(*lines: str) -> str:
    """Hover text: the case id (customdata[0], escaped), then the given lines. One template
    per trace instead of a string per point keeps a 5,000-case view small."""
    return "<br>".join(["<b>%{customdata[0]}</b>", *lines]) + "<extra>%{fullData.name}</extra>"


def positions(cases: Sequence[CaseView]) -> dict[str, float]:
    """Each case's place on a per-case chart's axis (see configuration.placement)."""
    return placement(cases).x


def hover_data(group: Sequence[CaseView], *values: Callable[[CaseView], Any]) -> list[list[Any]]:
    return [[hover_id(c), *(v(c) for v in values)] for c in group]


def hover_id(case: CaseView) -> str:
    """The case id as the hover's first line, with its ``hoverMark`` when it has one (the
    report page marks the cases that moved against their history)."""
    mark = case.hover_mark
    return text(case.id) + (f" · {text(mark)}" if mark else "")


def caveat_codes(case: CaseView) -> list[str]:
    return [c.code for c in case.caveats]


# A caveated case's marker gets a dark outline, so it stands out without hovering.
CAVEAT_OUTLINE = "#111111"


def scatter(group: Sequence[CaseView], key: tuple[str, str], x: Sequence[Any], y: Sequence[Any],
            custom: list[list[Any]], template: str, **extra: Any) -> Trace:
    trace: Trace = {
        "type": "scatter", "mode": "markers", "x": list(x), "y": list(y),
        "name": series_name(key), "legendgroup": series_name(key), "marker": marker(key),
        "customdata": custom, "hovertemplate": template,
    }
    trace.update(extra)
    codes = [caveat_codes(c) for c in group]
    if any(codes):
        style = trace["marker"]
        colour = style.get("line", {}).get("color", style.get("color"))
        trace["marker"] = {**style, "line": {
            "width": [2.0 if c else 1.0 for c in codes],
            "color": [CAVEAT_OUTLINE if c else colour for c in codes]}}
        trace["hovertext"] = [f"caveats: {text(', '.join(c))}" if c else "no caveat"
                              for c in codes]
        trace["hovertemplate"] = template.replace("<extra>", "<br>%{hovertext}<extra>", 1)
    return trace


def per_case(cases: Sequence[CaseView], value: Callable[[CaseView], Any], template: str,
             *custom: Callable[[CaseView], Any]) -> list[Trace]:
    pos = positions(cases)
    return [scatter(group, key, [pos[c.id] for c in group], [value(c) for c in group],
                    hover_data(group, *custom), template)
            for key, group in grouped(cases).items()]
