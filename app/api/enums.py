"""The API's enumerations, each one OpenAPI component that every operation refers to
(a generated client gets one type for each): values a field or parameter is limited to."""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from typing import get_args

from app.case_fields import SORTABLE, CaseField
from app.matrix_metrics import DEFAULT_METRIC, METRICS
from ingest.regressions import Status


@cache
def choice_enum(field: CaseField) -> type[StrEnum]:
    """The enum of a case field whose wire values are limited (``choices``), named after
    the field (mode -> Mode)."""
    name = field.wire[:1].upper() + field.wire[1:]
    return StrEnum(name, {c: c for c in field.choices})  # type: ignore[return-value]


class SortOrder(StrEnum):
    asc = "asc"
    desc = "desc"


# Report order, or any sortable case field (case_fields: a field made sortable is one).
CaseSort = StrEnum(  # type: ignore[misc]
    "CaseSort", {name: name for name in ("position", *(f.wire for f in SORTABLE))})
# The metric a configuration-matrix cell shows (the matrix and the export's matrix).
MatrixMetricName = StrEnum(  # type: ignore[misc]
    "MatrixMetricName", {name: name for name in METRICS})
DEFAULT_MATRIX_METRIC = MatrixMetricName(DEFAULT_METRIC)
# A case's verdict against its history (ingest.regressions); RegressionKind: those flagged.
Verdict = StrEnum("Verdict", {s: s for s in get_args(Status)})  # type: ignore[misc]


class RegressionKind(StrEnum):
    regression = "regression"
    improvement = "improvement"
