"""The case as the API answers it, and a report's summary, built from the field list
(``app.case_fields.FIELDS``): a field another change declares there is in the contract
without an edit here. Wire fields keep the wire model's type (``ingest.schema.Case``);
fields only the service knows (derived) are nullable numbers of their kind; unknown wire
fields a runner sent pass through (``extra="allow"``), as ``report.json`` keeps them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from app.api.enums import choice_enum
from app.case_fields import FIELDS, FILTERABLE, CaseField
from ingest.schema import Case as WireCase


class Caveat(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str
    message: str


def _kind_type(field: CaseField) -> Any:
    if field.choices:
        return choice_enum(field)
    if field.kind is list:
        return list[Any]
    if field.kind is dict:
        return dict[str, Any]
    return field.kind


def _case_field(field: CaseField) -> tuple[Any, Any]:
    wire = WireCase.model_fields.get(field.wire)
    description = field.label
    if wire is None:  # derived, or declared before the wire model has it
        return _kind_type(field) | None, Field(None, description=description)
    annotation = choice_enum(field) if field.choices else wire.annotation
    if wire.is_required():
        return annotation, Field(description=description)
    return annotation, Field(None, description=description)


def case_model(fields: tuple[CaseField, ...]) -> type[BaseModel]:
    """The case answer's model for these fields (the app's: ``CaseOut``, from FIELDS)."""
    return create_model(  # type: ignore[call-overload, no-any-return]
        "CaseOut",
        __config__=ConfigDict(extra="allow"),
        __doc__="A case as posted, with its derived fields (null where the report's meta "
                "lacks the peak they need) and the caveats that qualify it.",
        **{f.wire: _case_field(f) for f in fields},
        caveats=(list[Caveat], Field(description="what qualifies this case's figures")),
    )


CaseOut = case_model(FIELDS)

ReportFacets = create_model(  # type: ignore[call-overload]
    "ReportFacets",
    __config__=ConfigDict(extra="forbid"),
    __doc__="Each filterable field's distinct values in the report, sorted, and how many "
            "cases carry each caveat code.",
    **{f.wire: (list[_kind_type(f)], ...) for f in FILTERABLE},  # type: ignore[misc]
    caveatCounts=(dict[str, int], ...),
)
