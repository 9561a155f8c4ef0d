"""A case as the screens' read models read it by name: typed and frozen, built once per
cached report (``report_view.ReportData.views``). Each attribute is the case field of that
wire name (``app.case_fields``; tests/test_case_fields.py checks the names and kinds), so
a misspelt field is a type error, not a silent None."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from app.case_fields import CaseDict


@dataclass(frozen=True, slots=True)
class CaseView:
    id: str
    mode: str
    ep: int
    precision: str
    pipeline: str
    category: str
    F: int  # noqa: N815 - the wire name
    imbalance: float
    layerMS: float | None  # noqa: N815
    usefulTFPerGPU: float | None  # noqa: N815
    percentOfPeak: float | None  # noqa: N815
    windowSpreadPercent: float | None  # noqa: N815
    limiter: str | None
    computeUtilPercent: float | None  # noqa: N815
    hbmUtilPercent: float | None  # noqa: N815
    nvlinkUtilPercent: float | None  # noqa: N815
    hotRankFactor: float | None  # noqa: N815
    caveats: frozenset[str]  # the codes it carries


WIRE_NAMES = tuple(f.name for f in fields(CaseView) if f.name != "caveats")


def case_view(case: CaseDict) -> CaseView:
    """The view of a case as served (``services.cases.view_cases``)."""
    # Any: the served case's values are as ingest derived and stored them, of each field's
    # kind (its ``case_fields`` entry); the dataclass names what is read.
    values: dict[str, Any] = {name: case.get(name) for name in WIRE_NAMES}
    return CaseView(**values, caveats=frozenset(c["code"] for c in case.get("caveats", ())))
