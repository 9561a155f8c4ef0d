"""The case table: its columns, a case's row for the grid and for the CSV download."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from app.case_fields import TABLED
from app.case_view import CaseView

# The grid shows 4 significant digits; 6 keep its sorting and filtering exact enough and
# make a 5,000-row update a third smaller. The CSV takes the exact values (csv_rows).
GRID_DIGITS = 6

# (name, label): the tabled case fields, then the case's caveat codes.
TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    *((f.wire, f.label) for f in TABLED), ("caveats", "caveats"))


def table_row(case: CaseView, digits: int | None = None) -> dict[str, Any]:
    """A case's table row, floats rounded to ``digits`` significant digits (or exact); no
    empty field (the grid and the CSV read a missing one as empty) and no link: the id
    cell builds it (see static/)."""
    row = {f.wire: _rounded(value, digits) for f in TABLED
           if (value := case.value(f.wire)) is not None}
    row["caveats"] = " ".join(c.code for c in case.caveats)
    return row


def _rounded(value: Any, digits: int | None) -> Any:
    if digits is None or not isinstance(value, float):
        return value
    return float(f"{value:.{digits}g}")


def table_rows(cases: Sequence[CaseView]) -> list[dict[str, Any]]:
    """The case table as the grid gets it: a 5,000-case view sends every row on each
    filter change, so rows are small."""
    return [table_row(case, GRID_DIGITS) for case in cases]


def _csv_cell(value: Any) -> Any:
    # A spreadsheet runs a cell starting with = + - @ as a formula: report strings must not.
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def csv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([name for name, _ in TABLE_COLUMNS])
    for row in rows:
        writer.writerow([_csv_cell(row.get(name)) for name, _ in TABLE_COLUMNS])
    return out.getvalue()
