"""How a case looks on every chart: one colour and one marker shape per precision (from
colour-blind-safe palettes: no red or green, which mean worse and better), a mark inside the
marker and a bar pattern per pipeline, series grouped by (precision, pipeline), and report
strings escaped for plotly.

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

from app.case_view import CaseView

Meta = dict[str, Any]
Trace = dict[str, Any]
Spec = dict[str, Any]  # a plotly figure as plain data: {"data": [...], "layout": {...}}

GIB = float(2**30)

# Okabe & Ito's colour-blind-safe colours for the known precisions (blue, orange, reddish
# purple, sky blue), Paul Tol's muted scheme for others: told apart under every common
# colour-vision deficiency, and none is the red or green of a regression or improvement.
_KNOWN_COLOURS = {"bf16": "#0072B2", "mxfp8": "#E69F00", "nvfp4": "#CC79A7", "fp8": "#56B4E9"}
PALETTE = ("#332288", "#44AA99", "#882255", "#999933", "#88CCEE", "#AA4499", "#DDCC77")
# The precision's shape repeats its colour for whoever cannot tell the colours apart.
_KNOWN_SHAPES = {"bf16": "circle", "mxfp8": "square", "nvfp4": "diamond", "fp8": "triangle-up"}
# The pipeline's mark inside the shape (plotly's -cross and -x symbols, which only circle,
# square and diamond have); another pipeline gets a dot.
_KNOWN_MARKS = {"standard": "", "staged": "-cross", "mega": "-x"}
_CROSSABLE = frozenset({"circle", "square", "diamond"})
# The other shapes have only -dot: on them staged is the dot and mega the shape's sibling
# (its star, the hexagon's hexagram, the hourglass turned), so fp8 · staged and fp8 · mega
# differ. No sibling is another precision's shape.
_SIBLINGS = {"triangle-up": "star-triangle-up", "triangle-down": "star-triangle-down",
             "pentagon": "star", "hexagon": "hexagram", "hourglass": "bowtie"}
_SHAPES = tuple(_SIBLINGS)
_KNOWN_PATTERNS = {"standard": "", "staged": "/", "mega": "x"}
_PATTERNS = ("\\", "-", "|", "+", ".")


def _stable_index(name: str, size: int) -> int:
    # crc32, not hash(): the same name gets the same style in every process and export.
    return zlib.crc32(name.encode("utf-8")) % size


def precision_colour(precision: str) -> str:
    """One colour per precision, the same on every chart and in every process."""
    return _KNOWN_COLOURS.get(precision) or PALETTE[_stable_index(precision, len(PALETTE))]


def precision_symbol(precision: str) -> str:
    """One marker shape per precision, the same on every chart."""
    return _KNOWN_SHAPES.get(precision) or _SHAPES[_stable_index(precision, len(_SHAPES))]


def pipeline_symbol(pipeline: str) -> str:
    """The pipeline's mark inside a precision's shape: '' (plain), '-cross', '-x', '-dot'."""
    known = _KNOWN_MARKS.get(pipeline)
    return known if known is not None else "-dot"


def marker_symbol(key: tuple[str, str]) -> str:
    """plotly's symbol of a (precision, pipeline), filled: the shape with the pipeline's
    mark; three pipelines, three symbols, on every shape."""
    shape, mark = precision_symbol(key[0]), pipeline_symbol(key[1])
    if shape in _CROSSABLE:
        return shape + mark
    sibling = _SIBLINGS.get(shape, shape)
    return {"": shape, "-cross": shape + "-dot", "-x": sibling}.get(mark, sibling + "-dot")


def open_symbol(symbol: str) -> str:
    """The open (outline) form: plotly names it 'circle-open-dot', never 'circle-dot-open'."""
    if symbol.endswith("-dot"):
        return symbol.removesuffix("-dot") + "-open-dot"
    return symbol + "-open"


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


def series_key(case: CaseView) -> tuple[str, str]:
    return case.precision, case.pipeline


def series_name(key: tuple[str, str]) -> str:
    return f"{text(key[0])} · {text(key[1])}"


def grouped(cases: Iterable[CaseView]) -> dict[tuple[str, str], list[CaseView]]:
    """Cases by (precision, pipeline), in first-seen order: one trace per style."""
    groups: dict[tuple[str, str], list[CaseView]] = defaultdict(list)
    for case in cases:
        groups[series_key(case)].append(case)
    return dict(groups)


def marker(key: tuple[str, str], *, open_: bool = False, size: int = 9) -> dict[str, Any]:
    colour = precision_colour(key[0])
    symbol = marker_symbol(key)
    inner = symbol.endswith(("-cross", "-x", "-dot"))
    # A filled marker draws its inner mark in the line colour: white, or it would vanish.
    line = "#ffffff" if inner and not open_ else colour
    return {"color": colour, "symbol": open_symbol(symbol) if open_ else symbol,
            "size": size + (1 if inner else 0), "line": {"width": 1, "color": line}}


def bar_marker(key: tuple[str, str]) -> dict[str, Any]:
    return {"color": precision_colour(key[0]),
            "pattern": {"shape": pipeline_pattern(key[1]), "fillmode": "overlay"}}
