"""All queries that read cases."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import InstrumentedAttribute, Session, defer

from app.core.errors import NotFound
from app.models import CaseRow, CaveatRow, ReportRow

# Derived field name -> column (DESIGN.md), computed at ingest.
DERIVED: dict[str, InstrumentedAttribute[Any]] = {
    "percentOfPeak": CaseRow.percent_of_peak,
    "hbmPercentOfPeak": CaseRow.hbm_percent_of_peak,
    "nvlinkTXPercentOfPeak": CaseRow.nvlink_tx_percent_of_peak,
    "nvlinkRXPercentOfPeak": CaseRow.nvlink_rx_percent_of_peak,
    "windowSpreadPercent": CaseRow.window_spread_percent,
    "observedImbalance": CaseRow.observed_imbalance,
}

# Wire (and derived) field name -> column, for sorting. The API accepts these names.
SORTABLE: dict[str, InstrumentedAttribute[Any]] = {
    "position": CaseRow.position,
    "id": CaseRow.case_id,
    "mode": CaseRow.mode,
    "ep": CaseRow.ep,
    "category": CaseRow.category,
    "F": CaseRow.f,
    "imbalance": CaseRow.imbalance,
    "precision": CaseRow.precision,
    "pipeline": CaseRow.pipeline,
    "forwardMS": CaseRow.forward_ms,
    "backwardMS": CaseRow.backward_ms,
    "layerMS": CaseRow.layer_ms,
    "usefulTFPerGPU": CaseRow.useful_tf_per_gpu,
    "nvlinkTXGBps": CaseRow.nvlink_tx_gbps,
    "nvlinkRXGBps": CaseRow.nvlink_rx_gbps,
    "nvlinkMaxTXGBps": CaseRow.nvlink_max_tx_gbps,
    "nvlinkMaxRXGBps": CaseRow.nvlink_max_rx_gbps,
    "analyticalHBMGBps": CaseRow.analytical_hbm_gbps,
    "slotBytes": CaseRow.slot_bytes,
    "scratchBytes": CaseRow.scratch_bytes,
    "arenaBytes": CaseRow.arena_bytes,
    "inputBytes": CaseRow.input_bytes,
    "allocatedPeakGiB": CaseRow.allocated_peak_gib,
    "reservedPeakGiB": CaseRow.reserved_peak_gib,
    "capacityRows": CaseRow.capacity_rows,
    "logicalForwardPayloadBytesRank0": CaseRow.logical_forward_payload_bytes_rank0,
    "forwardFlopsPerLogicalPayloadByteRank0": CaseRow.forward_flops_per_logical_payload_byte_rank0,
    **DERIVED,
}


@dataclass
class CaseFilter:
    """Each list is 'any of'; an empty list does not filter."""

    mode: list[str] = field(default_factory=list)
    ep: list[int] = field(default_factory=list)
    precision: list[str] = field(default_factory=list)
    pipeline: list[str] = field(default_factory=list)
    category: list[str] = field(default_factory=list)
    F: list[int] = field(default_factory=list)
    imbalance: list[float] = field(default_factory=list)

    def conditions(self) -> list[ColumnElement[bool]]:
        pairs: list[tuple[InstrumentedAttribute[Any], list[Any]]] = [
            (CaseRow.mode, self.mode),
            (CaseRow.ep, self.ep),
            (CaseRow.precision, self.precision),
            (CaseRow.pipeline, self.pipeline),
            (CaseRow.category, self.category),
            (CaseRow.f, self.F),
            (CaseRow.imbalance, self.imbalance),
        ]
        return [column.in_(values) for column, values in pairs if values]

    def passing(self, cases: Sequence[Mapping[str, Any]]) -> list[int]:
        """The positions of the cases (wire field names) that pass, as ``conditions``
        decide in SQL."""
        active = [(f.name, values) for f in fields(self) if (values := getattr(self, f.name))]
        return [i for i, case in enumerate(cases)
                if all(case.get(name) in values for name, values in active)]


# The array columns repeat what ``payload`` holds (they exist for SQL); decoding them again
# for every listed case was a quarter of a 63-case page's time. raiseload: never lazily.
_PAYLOAD_COPIES = [
    defer(column, raiseload=True)
    for column in (CaseRow.windows, CaseRow.receive_rows, CaseRow.saved_bytes, CaseRow.recompute)
]


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
    where = [CaseRow.report_id == report_id, *(filters or CaseFilter()).conditions()]
    column = SORTABLE[sort]
    # Nulls last both ways, so "best first" never starts with unmeasured cases.
    order = column.desc().nulls_last() if descending else column.asc().nulls_last()
    rows = list(session.execute(
        select(CaseRow).where(*where).order_by(order, CaseRow.position)
        .options(*_PAYLOAD_COPIES).limit(limit).offset(offset)
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
    dashboard draws them all). Two queries reading only the posted payload and the
    derived columns: a 5,000-case view must not decode each case's JSON five times."""
    _require_report(session, report_id)
    where = [CaseRow.report_id == report_id, *(filters or CaseFilter()).conditions()]
    rows = session.execute(
        select(CaseRow.id, CaseRow.payload, *DERIVED.values())
        .where(*where).order_by(CaseRow.position)
    ).all()
    caveats: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for pk, code, message in session.execute(
        select(CaveatRow.case_pk, CaveatRow.code, CaveatRow.message)
        .join(CaseRow, CaseRow.id == CaveatRow.case_pk).where(*where).order_by(CaveatRow.id)
    ).all():
        caveats[pk].append((code, message))
    return [CaseDocument(row[1], dict(zip(DERIVED, row[2:], strict=True)), caveats[row[0]])
            for row in rows]


def get_case(session: Session, report_id: int, case_id: str) -> CaseRow:
    row = session.execute(
        select(CaseRow).where(CaseRow.report_id == report_id, CaseRow.case_id == case_id)
    ).scalar_one_or_none()
    if row is None:
        _require_report(session, report_id)
        raise NotFound(f"report {report_id} has no case {case_id!r}")
    return row


def facets(session: Session, report_id: int) -> dict[str, list[Any]]:
    """Distinct values of each filterable field in one report, sorted."""
    _require_report(session, report_id)
    columns = {
        "mode": CaseRow.mode, "ep": CaseRow.ep, "precision": CaseRow.precision,
        "pipeline": CaseRow.pipeline, "category": CaseRow.category, "F": CaseRow.f,
        "imbalance": CaseRow.imbalance,
    }
    return {
        name: list(session.execute(
            select(column).where(CaseRow.report_id == report_id).distinct().order_by(column)
        ).scalars().all())
        for name, column in columns.items()
    }


def caveat_counts(session: Session, report_id: int) -> dict[str, int]:
    """How many cases of the report carry each caveat code."""
    rows = session.execute(
        select(CaveatRow.code, func.count(func.distinct(CaveatRow.case_pk)))
        .join(CaseRow, CaseRow.id == CaveatRow.case_pk)
        .where(CaseRow.report_id == report_id)
        .group_by(CaveatRow.code).order_by(CaveatRow.code)
    ).all()
    return {code: int(n) for code, n in rows}
