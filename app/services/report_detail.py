"""One report's detail as the API gives it: the stored row (header and meta) and the
summary of its cases (the filters' facets, the caveat counts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.models import ReportRow
from app.repository import cases as cases_repo
from app.repository import reports as reports_repo


@dataclass(frozen=True)
class ReportDetail:
    row: ReportRow
    summary: dict[str, Any]  # each filterable field's values, and "caveatCounts"


def report_detail(session: Session, report_id: int) -> ReportDetail:
    row = reports_repo.get_report(session, report_id)
    return ReportDetail(row, {**cases_repo.facets(session, report_id),
                              "caveatCounts": cases_repo.caveat_counts(session, report_id)})
