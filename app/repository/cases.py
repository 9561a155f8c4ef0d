"""All queries that read cases. Which column holds which field, and which fields filter
and sort, is ``app.case_fields``'s."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, String, cast, func, literal, select, union_all
from sqlalchemy.orm import InstrumentedAttribute, Session

from app import case_fields, report_body
from app.case_fields import CaseField, CaseFilter
from app.core.errors import NotFound
from app.models import CaseRow, CaveatRow, ReportRow


def column(field: CaseField) -> InstrumentedAttribute[Any]:
    """The ``cases`` column that holds a case field."""
    assert field.column is not None, f"{field.wire} has no column"
    attribute: InstrumentedAttribute[Any] = getattr(CaseRow, field.column)
    return attribute


# Derived field name -> column (docs/metrics.md), computed at ingest.
DERIVED: dict[str, InstrumentedAttribute[Any]] = {f.wire: column(f) for f in case_fields.DERIVED}

# The API's sort keys: the sortable fields' wire names, and the report's own order.
SORTABLE: dict[str, InstrumentedAttribute[Any]] = {
    "position": CaseRow.position, **{f.wire: column(f) for f in case_fields.SORTABLE}}


def _where(report_id: int, filters: CaseFilter | None) -> list[ColumnElement[bool]]:
    """The report's cases that pass the filters: the one implementation of filtering."""
    return [CaseRow.report_id == report_id,
            *(column(f).in_(values) for f, values in (filters or CaseFilter()).active())]


def _require_report(session: Session, report_id: int) -> None:
    # The id alone: loading the row would decode its meta JSON for nothing.
    if session.execute(
        select(ReportRow.id).where(ReportRow.id == report_id)
    ).scalar_one_or_none() is None:
        raise NotFound(f"report {report_id} does not exist")


def list_cases(
    session: Session,
    report_id: int,
    *,
    filters: CaseFilter | None = None,
    sort: str = "position",
    descending: bool = False,
    limit: int = 1000,
    offset: int = 0,
) -> tuple[list[CaseRow], int]:
    where = _where(report_id, filters)
    key = SORTABLE[sort]
    # Nulls last both ways, so "best first" never starts with unmeasured cases.
    order = key.desc().nulls_last() if descending else key.asc().nulls_last()
    rows = list(session.execute(
        select(CaseRow).where(*where).order_by(order, CaseRow.position)
        .limit(limit).offset(offset)
    ).scalars().all())
    # The usual page (a whole report, under the limit) needs neither the existence check
    # nor the count: rows prove the report exists, and a short page ends the list.
    if not rows:
        _require_report(session, report_id)
    if 0 < len(rows) < limit or (not rows and offset == 0):
        return rows, offset + len(rows)
    total = session.execute(select(func.count(CaseRow.id)).where(*where)).scalar_one()
    return rows, int(total)


@dataclass(frozen=True)
class CaseDocument:
    """A case as posted, its derived fields and its caveats (code, message)."""

    payload: dict[str, Any]
    derived: dict[str, float | None]
    caveats: list[tuple[str, str]]


def case_documents(
    session: Session, report_id: int, filters: CaseFilter | None = None
) -> list[CaseDocument]:
    """Every case of a report that passes the filters, in report order, unpaged (the
    dashboard draws them all). Three queries: the report's body (every case as posted,
    decoded once), the derived columns, the caveats."""
    payloads = case_payloads(session, report_id)
    where = _where(report_id, filters)
    rows = session.execute(
        select(CaseRow.id, CaseRow.case_id, *DERIVED.values())
        .where(*where).order_by(CaseRow.position)
    ).all()
    caveats: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for pk, code, message in session.execute(
        select(CaveatRow.case_pk, CaveatRow.code, CaveatRow.message)
        .join(CaseRow, CaseRow.id == CaveatRow.case_pk).where(*where).order_by(CaveatRow.id)
    ).all():
        caveats[pk].append((code, message))
    return [CaseDocument(payloads[row[1]], dict(zip(DERIVED, row[2:], strict=True)),
                         caveats[row[0]])
            for row in rows]


def case_payloads(session: Session, report_id: int) -> dict[str, dict[str, Any]]:
    """Case id -> the case as posted (unknown fields included), from the report's body."""
    body = session.execute(
        select(ReportRow.body).where(ReportRow.id == report_id)
    ).scalar_one_or_none()
    if body is None:
        raise NotFound(f"report {report_id} does not exist")
    return {case["id"]: case for case in report_body.document(bytes(body))["cases"]}


def get_case(session: Session, report_id: int, case_id: str) -> CaseRow:
    row = session.execute(
        select(CaseRow).where(CaseRow.report_id == report_id, CaseRow.case_id == case_id)
    ).scalar_one_or_none()
    if row is None:
        _require_report(session, report_id)
        raise NotFound(f"report {report_id} has no case {case_id!r}")
    return row


def case_ids(session: Session, report_id: int, filters: CaseFilter) -> list[str]:
    """The ids of the report's cases that pass the filters, in report order."""
    return list(session.execute(
        select(CaseRow.case_id).where(*_where(report_id, filters)).order_by(CaseRow.position)
    ).scalars().all())


def facets(session: Session, report_id: int) -> dict[str, list[Any]]:
    """Distinct values of each filterable field in one report, sorted."""
    _require_report(session, report_id)
    return {
        f.wire: list(session.execute(
            # A derived field (the limiter) is null where no roof is known: not a value.
            select(column(f)).where(CaseRow.report_id == report_id, column(f).is_not(None))
            .distinct()
            .order_by(column(f))
        ).scalars().all())
        for f in case_fields.FILTERABLE
    }


def option_counts(session: Session, report_id: int, filters: CaseFilter
                  ) -> dict[str, dict[Any, int]]:
    """Per filterable field, how many of the report's cases each of its values would show
    under the other filters (the field's own left out, so its values stay choosable): one
    statement, each part filtered by ``_where`` as the view's cases are. A value no case
    has under the others is absent."""
    parts = []
    for f in case_fields.FILTERABLE:
        others = CaseFilter(**{g.wire: v for g, v in filters.active() if g.wire != f.wire})
        parts.append(select(literal(f.wire).label("field"),
                            cast(column(f), String).label("value"),
                            func.count(CaseRow.id).label("cases"))
                     .where(*_where(report_id, others)).group_by(column(f)))
    kinds = {f.wire: f.kind for f in case_fields.FILTERABLE}
    counts: dict[str, dict[Any, int]] = {f.wire: {} for f in case_fields.FILTERABLE}
    for wire, value, cases in session.execute(union_all(*parts)).all():
        counts[wire][None if value is None else kinds[wire](value)] = int(cases)
    return counts


def caveat_counts(
    session: Session, report_id: int, filters: CaseFilter | None = None
) -> dict[str, int]:
    """How many of the report's cases that pass the filters carry each caveat code."""
    rows = session.execute(
        select(CaveatRow.code, func.count(func.distinct(CaveatRow.case_pk)))
        .join(CaseRow, CaseRow.id == CaveatRow.case_pk)
        .where(*_where(report_id, filters))
        .group_by(CaveatRow.code).order_by(CaveatRow.code)
    ).all()
    return {code: int(n) for code, n in rows}
