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

from app.case_fields import CaseDict, CaseFilter
from app.figures.configuration import Configuration, configuration, variant, variant_key
from app.matrix_metrics import DEFAULT_METRIC, MatrixMetric, metric_for
from app.services import cases as case_service


@dataclass(frozen=True)
class MatrixCell:
    case_id: str
    value: float | str | None
    caveats: tuple[str, ...]


@dataclass(frozen=True)
class MatrixRow:
    configuration: Configuration
    label: str
    cells: tuple[MatrixCell | None, ...]  # one per column; None: not run
    best: int | None  # the column of the row's best cell


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


def build_matrix(cases: Sequence[CaseDict], metric: str = DEFAULT_METRIC) -> Matrix:
    """The matrix of the cases given (a filtered view gives a filtered matrix). A
    configuration run twice in one variant (ids differ) keeps the first in report order."""
    chosen = metric_for(metric)
    by_row: dict[Configuration, dict[tuple[str, str], CaseDict]] = {}
    for case in cases:
        by_row.setdefault(configuration(case), {}).setdefault(variant(case), case)
    columns = tuple(sorted({v for cells in by_row.values() for v in cells}, key=variant_key))
    with_category = len({c.category for c in by_row}) > 1
    rows = []
    for config in sorted(by_row, key=Configuration.sort_key):
        cells = tuple(_cell(by_row[config].get(column), chosen) for column in columns)
        rows.append(MatrixRow(config, config.label(with_category), cells, _best(cells, chosen)))
    return Matrix(chosen, columns, tuple(rows))


def _cell(case: CaseDict | None, metric: MatrixMetric) -> MatrixCell | None:
    if case is None:
        return None
    codes = tuple(c["code"] for c in case.get("caveats", []))
    return MatrixCell(str(case["id"]), case.get(metric.key), codes)


def _best(cells: Sequence[MatrixCell | None], metric: MatrixMetric) -> int | None:
    scored = [(cell.value, i) for i, cell in enumerate(cells)
              if cell is not None and isinstance(cell.value, int | float)]
    if metric.better is None or len(scored) < 2:
        return None  # one cell alone is not "best" of anything
    pick = max if metric.better == "higher" else min
    return pick(scored, key=lambda pair: pair[0])[1]


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
            "cells": [None if c is None else {"caseId": c.case_id, "value": c.value}
                      for c in r.cells],
            "best": r.best,
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
    return build_matrix(case_service.view_cases(session, report_id, filters), metric)
