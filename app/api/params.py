"""Path and query parameters the routes share: report ids, and the case filters of the case
list and the HTML export."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Depends, Path, Query
from pydantic import AfterValidator, Field

from app.repository.cases import CaseFilter
from ingest.schema import INT32_MAX, INT64_MAX


def no_nul(text: str) -> str:
    if "\x00" in text:
        raise ValueError("must not contain a NUL byte")
    return text


# Bounds of the columns they are compared with: past them the database raises (a 500),
# and Postgres rejects NUL in any text parameter.
ReportId = Annotated[int, Path(ge=1, le=INT32_MAX)]
ReportIdQuery = Annotated[int, Query(ge=1, le=INT32_MAX)]
Text = Annotated[str, AfterValidator(no_nul)]
EpValue = Annotated[int, Field(ge=1, le=INT32_MAX)]
FValue = Annotated[int, Field(ge=1, le=INT64_MAX)]


def case_filter(
    mode: Annotated[list[Literal["inference", "training"]], Query()] = [],  # noqa: B006
    ep: Annotated[list[EpValue], Query()] = [],  # noqa: B006
    precision: Annotated[list[Text], Query()] = [],  # noqa: B006
    pipeline: Annotated[list[Text], Query()] = [],  # noqa: B006
    category: Annotated[list[Text], Query()] = [],  # noqa: B006
    F: Annotated[list[FValue], Query()] = [],  # noqa: B006
    imbalance: Annotated[list[float], Query()] = [],  # noqa: B006
) -> CaseFilter:
    """Repeat a filter to match any of its values."""
    return CaseFilter(mode=list(mode), ep=ep, precision=precision, pipeline=pipeline,
                      category=category, F=F, imbalance=imbalance)


CaseFilterDep = Annotated[CaseFilter, Depends(case_filter)]
