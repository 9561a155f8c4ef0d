"""Cases as the API and the dashboard give them: the case as posted, plus its derived fields
and its caveats. One shape for both, so the dashboard shows what the API serves."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.case_fields import CaseFilter
from app.case_view import CaseView, case_view
from app.figures.roofline import distances_text, roof_distances
from app.models import CaseRow, ReportRow
from app.repository import cases as cases_repo
from app.repository import reports as reports_repo
from app.repository.cases import DERIVED


def case_out(row: CaseRow, payload: dict[str, Any]) -> dict[str, Any]:
    """The case as posted (``payload``), plus the derived fields and its caveats."""
    return case_dict(
        payload,
        {name: getattr(row, column.key) for name, column in DERIVED.items()},
        [(c.code, c.message) for c in row.caveats],
    )


def case_dict(
    payload: dict[str, Any], derived: dict[str, float | None], caveats: list[tuple[str, str]]
) -> dict[str, Any]:
    return {**payload, **derived,
            "caveats": [{"code": code, "message": message} for code, message in caveats]}


# The fields /cases sorts by: every scalar wire and derived field, and the report's order.
SORT_FIELDS: tuple[str, ...] = tuple(cases_repo.SORTABLE)


def case_page(session: Session, report_id: int, *, filters: CaseFilter, sort: str,
              descending: bool, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The cases that pass ``filters``, sorted, ``limit`` from ``offset``; and how many
    pass in all."""
    rows, total = cases_repo.list_cases(session, report_id, filters=filters, sort=sort,
                                        descending=descending, limit=limit, offset=offset)
    return cases_out(session, report_id, rows), total


def get_case(session: Session, report_id: int, case_id: str) -> dict[str, Any]:
    row = cases_repo.get_case(session, report_id, case_id)
    return case_out(row, cases_repo.case_payloads(session, report_id)[case_id])


def cases_out(session: Session, report_id: int, rows: list[CaseRow]) -> list[dict[str, Any]]:
    """Rows of one report as ``case_out`` gives them, the report's body decoded once."""
    payloads = cases_repo.case_payloads(session, report_id) if rows else {}
    return [case_out(row, payloads[row.case_id]) for row in rows]


def view_cases(session: Session, report_id: int,
               filters: CaseFilter | None = None) -> list[dict[str, Any]]:
    """Every case of the report that passes the filters, in report order, unpaged."""
    return [case_dict(d.payload, d.derived, d.caveats)
            for d in cases_repo.case_documents(session, report_id, filters)]


def case_views(session: Session, report_id: int,
               filters: CaseFilter | None = None) -> list[CaseView]:
    """``view_cases``, typed: what the read models past this service read."""
    return [case_view(c) for c in view_cases(session, report_id, filters)]


def roof_distances_text(session: Session, report_id: int, case: CaseView) -> str:
    """How close the case's busiest rank comes to each roof of its report, in words."""
    (meta,) = reports_repo.report_columns(session, report_id, ReportRow.meta)
    return distances_text(roof_distances(case, meta))
