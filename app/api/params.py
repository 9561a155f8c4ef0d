"""Path and query parameters the routes share: report ids, and the case filters of the case
list and the HTML export."""

from __future__ import annotations

import inspect
from enum import Enum
from typing import Annotated, Any

from fastapi import Depends, Path, Query
from pydantic import AfterValidator, Field
from sqlalchemy import BigInteger

from app.api.enums import choice_enum
from app.case_fields import FILTERABLE, CaseField, CaseFilter
from app.models import CaseRow
from ingest.schema import INT32_MAX, INT64_MAX


def no_nul(text: str) -> str:
    if "\x00" in text:
        raise ValueError("must not contain a NUL byte")
    return text


# Bounds of the columns they are compared with: past them the database raises (a 500),
# and Postgres rejects NUL in any text parameter.
ReportId = Annotated[int, Path(ge=1, le=INT32_MAX)]
ReportIdQuery = Annotated[int, Query(ge=1, le=INT32_MAX)]
# The schema says so too (a pattern), so a client or fuzzer generating from it does not
# send what is refused; the validator keeps the clearer message.
NO_NUL_PATTERN = "^[^\\u0000]*$"
Text = Annotated[str, AfterValidator(no_nul),
                 Field(json_schema_extra={"pattern": NO_NUL_PATTERN})]


def _query_type(field: CaseField) -> Any:
    """What one value of a filter must be: a value its column can hold (past the column's
    bounds the database raises, a 500, and Postgres rejects NUL in any text)."""
    if field.choices:
        return choice_enum(field)
    if field.kind is str:
        return Text
    if field.kind is int:
        # Every filterable count (EP, F) is at least 1 on the wire.
        big = isinstance(getattr(CaseRow, str(field.column)).type, BigInteger)
        return Annotated[int, Field(ge=1, le=INT64_MAX if big else INT32_MAX)]
    return field.kind


def case_filter(**values: list[Any]) -> CaseFilter:
    """Repeat a filter to match any of its values."""
    # An enum's member as its plain value: the database driver would write its name.
    return CaseFilter(**{wire: [v.value if isinstance(v, Enum) else v for v in vals]
                         for wire, vals in values.items()})


# FastAPI reads a dependency's parameters from its signature: here one repeatable query
# parameter per filterable case field, so a field declared filterable is an API filter.
setattr(case_filter, "__signature__", inspect.Signature([  # noqa: B010
    inspect.Parameter(f.wire, inspect.Parameter.KEYWORD_ONLY, default=[],
                      annotation=Annotated[list[_query_type(f)], Query()])  # type: ignore[misc]
    for f in FILTERABLE
], return_annotation=CaseFilter))

CaseFilterDep = Annotated[CaseFilter, Depends(case_filter)]
