"""The configuration matrix: one row per configuration (mode, EP, category, F, imbalance),
one column per precision x pipeline, each cell one metric of the case run there. The report
page, the HTML export and ``GET /reports/{id}/matrix`` all read it from here."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from sqlalchemy.orm import Session

from app.case_fields import CaseFilter
from app.case_view import CaseView
from app.figures.configuration import Configuration, configuration, variant, variant_key
from app.matrix_metrics import DEFAULT_METRIC, MatrixMetric, metric_for
from app.services import cases as case_service
from ingest.ties import Scored, best_of


@dataclass(frozen=True)
class MatrixCell:
    case_id: str  # the case whose value the cell shows
    value: float | str | None
    caveats: tuple[str, ...]
    # Every case of the report run in this cell, in report order (a configuration run twice
    # in one variant keeps both: the cell shows the best eligible one and says so).
    case_ids: tuple[str, ...] = ()
    noise_percent: float | None = None  # the shown case's windowSpreadPercent

    @property
    def count(self) -> int:
        return len(self.case_ids) or 1

    @property
    def hover(self) -> str:
        """The case shown, its caveats, and every case run in the same cell."""
        text = self.case_id + (f" (caveats: {', '.join(self.caveats)})" if self.caveats else "")
        if self.count > 1:
            text += f"; {self.count} cases here: " + ", ".join(self.case_ids)
        return text

    def scored(self) -> Scored | None:
        if not isinstance(self.value, int | float) or isinstance(self.value, bool):
            return None
        return Scored(float(self.value), self.noise_percent, frozenset(self.caveats))


@dataclass(frozen=True)
class MatrixRow:
    configuration: Configuration
    label: str
    cells: tuple[MatrixCell | None, ...]  # one per column; None: not run
    best: int | None  # the column of the row's best cell
    # The columns tied with the best within noise (ingest.ties), the best included.
    ties: tuple[int, ...] = ()


@dataclass(frozen=True)
class Matrix:
    metric: MatrixMetric
    columns: tuple[tuple[str, str], ...]  # (precision, pipeline)
    rows: tuple[MatrixRow, ...]

    def precision_spans(self) -> list[tuple[str, int]]:
        """Each precision of the columns with how many pipelines it spans (the header)."""
        return [(precision, len(list(group)))
                for precision, group in groupby(c[0] for c in self.columns)]

    def text(self, value: float | str | None) -> str:
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        return f"{value:,.{self.metric.digits}f}"


def build_matrix(cases: Sequence[CaseView], metric: str = DEFAULT_METRIC) -> Matrix:
    """The matrix of the cases given (a filtered view gives a filtered matrix). A
    configuration run more than once in one variant keeps every case in its cell."""
    chosen = metric_for(metric)
    by_row: dict[Configuration, dict[tuple[str, str], list[CaseView]]] = {}
    for case in cases:
        by_row.setdefault(configuration(case), {}).setdefault(variant(case), []).append(case)
    columns = tuple(sorted({v for cells in by_row.values() for v in cells}, key=variant_key))
    with_category = len({c.category for c in by_row}) > 1
    rows = []
    for config in sorted(by_row, key=Configuration.sort_key):
        cells = tuple(_cell(by_row[config].get(column, []), chosen) for column in columns)
        best = (None if chosen.better is None else
                best_of([c.scored() if c else None for c in cells], chosen.better, at_least=2))
        rows.append(MatrixRow(config, config.label(with_category), cells,
                              None if best is None else best.index,
                              () if best is None else best.ties))
    return Matrix(chosen, columns, tuple(rows))


def _one(case: CaseView, metric: MatrixMetric, ids: tuple[str, ...]) -> MatrixCell:
    codes = tuple(c.code for c in case.caveats)
    return MatrixCell(case.id, case.value(metric.key), codes, ids,
                      case.windowSpreadPercent)


def _cell(cases: Sequence[CaseView], metric: MatrixMetric) -> MatrixCell | None:
    """The cell of the cases run in it: the best eligible one shown (the first when the
    metric ranks nothing or none is eligible)."""
    if not cases:
        return None
    ids = tuple(c.id for c in cases)
    cells = [_one(c, metric, ids) for c in cases]
    if len(cells) == 1 or metric.better is None:
        return cells[0]
    best = best_of([c.scored() for c in cells], metric.better)
    return cells[0] if best is None else cells[best.index]


def column_label(column: tuple[str, str]) -> str:
    return f"{column[0]} {column[1]}"


def matrix_json(matrix: Matrix) -> dict[str, Any]:
    return {
        "metric": matrix.metric.key,
        "label": matrix.metric.label,
        "better": matrix.metric.better,
        "columns": [{"precision": p, "pipeline": q} for p, q in matrix.columns],
        "rows": [{
            "mode": r.configuration.mode, "ep": r.configuration.ep,
            "category": r.configuration.category, "F": r.configuration.F,
            "imbalance": r.configuration.imbalance, "label": r.label,
            "cells": [None if c is None else {
                "caseId": c.case_id, "value": c.value, "caseIds": list(c.case_ids),
                "count": c.count} for c in r.cells],
            "best": r.best,
            "ties": list(r.ties),
        } for r in matrix.rows],
    }


def matrix_csv(matrix: Matrix) -> str:
    """One line per configuration; a combination not run is an empty field, never 0."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["mode", "ep", "category", "F", "imbalance",
                     *(column_label(c) for c in matrix.columns)])
    for row in matrix.rows:
        c = row.configuration
        writer.writerow([c.mode, c.ep, c.category, c.F, f"{c.imbalance:g}",
                         *("" if cell is None or cell.value is None else cell.value
                           for cell in row.cells)])
    return out.getvalue()


def report_matrix(session: Session, report_id: int, filters: CaseFilter,
                  metric: str = DEFAULT_METRIC) -> Matrix:
    """The matrix of a report's cases that pass the filters (the ``/cases`` filters)."""
    return build_matrix(case_service.case_views(session, report_id, filters), metric)
