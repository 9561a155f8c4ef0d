"""The platforms page's winner matrix (issue 25, item 3): one row per configuration (mode,
EP, F, imbalance, category), under each platform one column per precision · pipeline that
any picked report ran, and the best cell of the row over every platform and variant marked,
with the cells tied with it within noise (ingest/ties.py). Built from the page's
per-(configuration, variant) rows, whose cells it reuses with the row's marks."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.figures.configuration import Configuration, variant_key
from ingest.ties import Scored, best_of

if TYPE_CHECKING:  # platforms builds its page from this module's matrix
    from app.services.platforms import Cell, Row


@dataclass(frozen=True)
class WinnerColumn:
    platform: int  # index into the page's platforms
    precision: str
    pipeline: str


@dataclass(frozen=True)
class WinnerRow:
    configuration: Configuration
    # One per column of the matrix; best and tied over the whole row, every platform and
    # variant; a variant the platform did not run is a cell whose reason is "not run".
    cells: tuple[Cell, ...]
    shape_differs: bool  # a platform's (T, D, E, K) differs in one of its variants


@dataclass(frozen=True)
class WinnerMatrix:
    columns: tuple[WinnerColumn, ...] = ()  # platform by platform, its variants within
    variants: tuple[tuple[str, str], ...] = ()  # (precision, pipeline) under each platform
    rows: tuple[WinnerRow, ...] = ()


def _scored(cell: Cell) -> Scored | None:
    if cell.useful_tf is None:
        return None
    return Scored(cell.useful_tf, cell.noise_percent, frozenset(cell.caveats))


def mark_best(cells: Sequence[Cell]) -> tuple[Cell, ...]:
    """The cells, the best of them (two at least eligible) and those tied with it marked."""
    best = best_of([_scored(c) for c in cells], "higher", at_least=2)
    return tuple(dataclasses.replace(
        cell, best=best is not None and best.index == i,
        tied=best is not None and best.tied and i in best.ties)
        for i, cell in enumerate(cells))


def winner_matrix(rows: Sequence[Row], platforms: int, not_run: Cell) -> WinnerMatrix:
    """``rows``: the page's, in its order (a configuration's variants next to each other);
    ``not_run``: the cell of a variant no picked report ran for the configuration."""
    variants = tuple(sorted({(r.precision, r.pipeline) for r in rows}, key=variant_key))
    columns = tuple(WinnerColumn(i, p, q) for i in range(platforms) for p, q in variants)
    grouped: dict[Configuration, dict[tuple[str, str], Row]] = {}
    for row in rows:
        grouped.setdefault(row.configuration, {})[(row.precision, row.pipeline)] = row
    out = []
    for configuration, by_variant in grouped.items():
        cells = [by_variant[(c.precision, c.pipeline)].cells[c.platform]
                 if (c.precision, c.pipeline) in by_variant else not_run for c in columns]
        out.append(WinnerRow(configuration, mark_best(cells),
                             any(r.shape_differs for r in by_variant.values())))
    return WinnerMatrix(columns, variants, tuple(out))
