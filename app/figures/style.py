"""How a case looks on every chart: one colour per precision, one marker and bar pattern per
pipeline, series grouped by (precision, pipeline), and report strings escaped for plotly.

Every string that comes from a report goes through :func:`text`: plotly renders a small
HTML subset in hover text, legends and titles, and a report's strings must show literally.
"""

from __future__ import annotations

import html
import zlib
from collections import defaultdict
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from app.case_fields import CaseDict

Meta = dict[str, Any]
Trace = dict[str, Any]
Spec = dict[str, Any]  # a plotly figure as plain data: {"data": [...], "layout": {...}}

GIB = float(2**30)

_KNOWN_COLOURS = {"bf16": "#1f77b4", "mxfp8": "#d62728", "nvfp4": "#2ca02c", "fp8": "#ff7f0e"}
PALETTE = ("#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#ff7f0e")
_KNOWN_SYMBOLS = {"standard": "circle", "staged": "square", "mega": "diamond"}
_SYMBOLS = ("triangle-up", "cross", "x", "star", "hexagon", "pentagon", "triangle-down")
_KNOWN_PATTERNS = {"standard": "", "staged": "/", "mega": "x"}
_PATTERNS = ("\\", "-", "|", "+", ".")


def _stable_index(name: str, size: int) -> int:
    # crc32, not hash(): the same name gets the same style in every process and export.
    return zlib.crc32(name.encode("utf-8")) % size


def precision_colour(precision: str) -> str:
    """One colour per precision, the same on every chart and in every process."""
    return _KNOWN_COLOURS.get(precision) or PALETTE[_stable_index(precision, len(PALETTE))]


def pipeline_symbol(pipeline: str) -> str:
    """One marker symbol per pipeline, the same on every chart."""
    return _KNOWN_SYMBOLS.get(pipeline) or _SYMBOLS[_stable_index(pipeline, len(_SYMBOLS))]


def pipeline_pattern(pipeline: str) -> str:
    """One bar fill pattern per pipeline (bars cannot carry marker symbols)."""
    known = _KNOWN_PATTERNS.get(pipeline)
    return known if known is not None else _PATTERNS[_stable_index(pipeline, len(_PATTERNS))]


def text(value: Any) -> str:
    """A report's string, escaped so plotly shows it literally instead of as markup."""
    return _escape(str(value))


@lru_cache(maxsize=65536)
def _escape(value: str) -> str:
    # Cached: every chart escapes every case id of the view again.
    return html.escape(value, quote=False)


def fmt(value: Any, digits: int = 1, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{unit}"
    return f"{value}{unit}"


def series_key(case: CaseDict) -> tuple[str, str]:
    return str(case["precision"]), str(case["pipeline"])


def series_name(key: tuple[str, str]) -> str:
    return f"{text(key[0])} · {text(key[1])}"


def grouped(cases: Iterable[CaseDict]) -> dict[tuple[str, str], list[CaseDict]]:
    """Cases by (precision, pipeline), in first-seen order: one trace per style."""
    groups: dict[tuple[str, str], list[CaseDict]] = defaultdict(list)
    for case in cases:
        groups[series_key(case)].append(case)
    return dict(groups)


def marker(key: tuple[str, str], *, open_: bool = False, size: int = 9) -> dict[str, Any]:
    colour = precision_colour(key[0])
    return {"color": colour, "symbol": pipeline_symbol(key[1]) + ("-open" if open_ else ""),
            "size": size, "line": {"width": 1, "color": colour}}


def bar_marker(key: tuple[str, str]) -> dict[str, Any]:
    return {"color": precision_colour(key[0]),
            "pattern": {"shape": pipeline_pattern(key[1]), "fillmode": "overlay"}}
