"""All queries on reports and on the cases as they are written. Helpers flush, never
commit: the request (or CLI command) boundary commits once, so a report lands whole."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, func, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.core.errors import Conflict, NotFound
from app.models import Base, CaseRow, ReportRow, utcnow
from app.repository.cases import DERIVED
from ingest.derived import Caveat, caveats, derive
from ingest.schema import Case, Meta, Report
from ingest.series import series_context

# Core tables for the bulk inserts: the ORM's bulk path only adds per-row bookkeeping.
_CASES = Base.metadata.tables["cases"]
_CAVEATS = Base.metadata.tables["caveats"]


@dataclass(frozen=True)
class IngestResult:
    id: int
    case_count: int
    created: bool
    cases_added: int = 0


def canonical_sha256(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _insert_ignoring_conflicts(session: Session, table: Any) -> Any:
    """INSERT ... ON CONFLICT DO NOTHING: concurrent identical posts race on the unique
    constraint inside the database instead of on a check-then-insert in Python."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    raise NotImplementedError(f"unsupported database dialect {dialect!r}")


def ingest_report(session: Session, raw: dict[str, Any], report: Report) -> IngestResult:
    """Store a validated report, or find the one it repeats (same content or runId).

    ``raw`` is the parsed JSON as posted; it is what ``report.json`` gives back."""
    meta_raw = raw["meta"]
    extra = {k: v for k, v in raw.items() if k not in ("meta", "cases")}
    stmt = _insert_ignoring_conflicts(session, ReportRow).values(
        content_sha256=canonical_sha256(raw),
        run_id=report.meta.runId,
        date=report.meta.date,
        gpu=report.meta.gpu,
        series=series_context(meta_raw),
        source=report.meta.source,
        meta=meta_raw,
        extra=extra,
        case_count=0,
        created_at=utcnow(),
        updated_at=utcnow(),
    ).returning(ReportRow.id)
    new_id = session.execute(stmt).scalar_one_or_none()
    if new_id is not None:
        _insert_cases(session, new_id, report.meta, raw["cases"], report.cases, start=0)
        count = _refresh_summary(session, new_id)
        return IngestResult(new_id, count, created=True, cases_added=count)

    existing = _find_repeat(session, canonical_sha256(raw), report.meta.runId)
    # The same runId with more cases is a runner resending: merge like an append.
    added = 0
    if report.cases:
        added = append_cases(session, existing, raw["cases"], report.cases).added
    count = session.execute(
        select(ReportRow.case_count).where(ReportRow.id == existing)
    ).scalar_one()
    return IngestResult(existing, count, created=False, cases_added=added)


def _find_repeat(session: Session, sha: str, run_id: str | None) -> int:
    conditions = [ReportRow.content_sha256 == sha]
    if run_id is not None:
        conditions.append(ReportRow.run_id == run_id)
    found = session.execute(select(ReportRow.id).where(or_(*conditions))).scalars().first()
    if found is None:
        # The conflicting row was deleted between our insert and this read.
        raise Conflict("the report conflicted with another being written; retry")
    return found


@dataclass(frozen=True)
class AppendResult:
    added: int
    unchanged: int
    case_count: int


def append_cases(
    session: Session, report_id: int, raw_cases: list[dict[str, Any]], cases: list[Case]
) -> AppendResult:
    """Append cases; an id already stored is a no-op when identical, else a 409."""
    # Touching the report row first serialises appends to one report (row lock on
    # Postgres, the write lock on SQLite) so positions and the summary stay coherent.
    touched = session.execute(
        update(ReportRow).where(ReportRow.id == report_id).values(updated_at=utcnow())
        .returning(ReportRow.meta)
    ).scalar_one_or_none()
    if touched is None:
        raise NotFound(f"report {report_id} does not exist")
    meta = Meta.model_validate(touched)

    ids = [c.id for c in cases]
    stored = dict(session.execute(
        select(CaseRow.case_id, CaseRow.content_sha256)
        .where(CaseRow.report_id == report_id, CaseRow.case_id.in_(ids))
    ).all())
    conflicts = [
        case_id for case_id, raw in zip(ids, raw_cases, strict=True)
        if case_id in stored and stored[case_id] != canonical_sha256(raw)
    ]
    if conflicts:
        raise Conflict(
            f"case id(s) already stored with different content: {', '.join(conflicts)}"
        )
    new = [(raw, case) for raw, case in zip(raw_cases, cases, strict=True) if case.id not in stored]
    if new:
        start = session.execute(
            select(func.coalesce(func.max(CaseRow.position) + 1, 0))
            .where(CaseRow.report_id == report_id)
        ).scalar_one()
        _insert_cases(session, report_id, meta, [r for r, _ in new], [c for _, c in new], start)
    count = _refresh_summary(session, report_id)
    return AppendResult(added=len(new), unchanged=len(cases) - len(new), case_count=count)


def _insert_cases(
    session: Session,
    report_id: int,
    meta: Meta,
    raw_cases: list[dict[str, Any]],
    cases: list[Case],
    start: int,
) -> None:
    if not cases:
        return
    rows, all_caveats = case_rows(report_id, meta, raw_cases, cases, start)
    # A plain executemany, not INSERT ... RETURNING: with RETURNING, SQLAlchemy sends one
    # statement of rows x columns placeholders, which psycopg re-parses in Python on every
    # call (too long for its cache): that was half the time of a 63-case ingest. The
    # executemany is one cached statement, pipelined; the ids follow in one query.
    session.execute(insert(_CASES), rows)
    if not any(all_caveats):
        return
    # Positions from ``start`` on are the rows just written: the caller holds the report.
    pk_of = dict(session.execute(
        select(CaseRow.position, CaseRow.id)
        .where(CaseRow.report_id == report_id, CaseRow.position >= start)
    ).all())
    caveat_rows = [
        {"case_pk": pk_of[row["position"]], "code": c.code, "message": c.message}
        for row, case_caveats in zip(rows, all_caveats, strict=True)
        for c in case_caveats
    ]
    session.execute(insert(_CAVEATS), caveat_rows)


def case_rows(
    report_id: int, meta: Meta, raw_cases: list[dict[str, Any]], cases: list[Case], start: int
) -> tuple[list[dict[str, Any]], list[list[Caveat]]]:
    """The ``cases`` rows to insert, and each case's caveats (pure: no database)."""
    rows = []
    all_caveats = []
    for offset, (raw, case) in enumerate(zip(raw_cases, cases, strict=True)):
        derived = derive(meta, case)
        all_caveats.append(caveats(meta, case, derived))
        rows.append(_case_row(report_id, start + offset, raw, case, derived.as_dict()))
    return rows, all_caveats


def _case_row(
    report_id: int, position: int, raw: dict[str, Any], case: Case, derived: dict[str, Any]
) -> dict[str, Any]:
    return {
        "report_id": report_id,
        "position": position,
        "case_id": case.id,
        "content_sha256": canonical_sha256(raw),
        "mode": case.mode,
        "ep": case.ep,
        "category": case.category,
        "f": case.F,
        "imbalance": case.imbalance,
        "precision": case.precision,
        "pipeline": case.pipeline,
        "emulated": case.emulated,
        "forward_ms": case.forwardMS,
        "backward_ms": case.backwardMS,
        "layer_ms": case.layerMS,
        "useful_tf_per_gpu": case.usefulTFPerGPU,
        "nvlink_tx_gbps": case.nvlinkTXGBps,
        "nvlink_rx_gbps": case.nvlinkRXGBps,
        "nvlink_max_tx_gbps": case.nvlinkMaxTXGBps,
        "nvlink_max_rx_gbps": case.nvlinkMaxRXGBps,
        "analytical_hbm_gbps": case.analyticalHBMGBps,
        "slot_bytes": case.slotBytes,
        "scratch_bytes": case.scratchBytes,
        "arena_bytes": case.arenaBytes,
        "input_bytes": case.inputBytes,
        "host_scratch_bytes": case.hostScratchBytes,
        "allocated_peak_gib": case.allocatedPeakGiB,
        "reserved_peak_gib": case.reservedPeakGiB,
        "numerical_accepted": case.numericalAccepted,
        "graph_accepted": case.graphAccepted,
        "allocation_retries": case.allocationRetries,
        "ooms": case.ooms,
        "logical_forward_payload_bytes_rank0": case.logicalForwardPayloadBytesRank0,
        "forward_flops_per_logical_payload_byte_rank0":
            case.forwardFlopsPerLogicalPayloadByteRank0,
        "capacity_rows": case.capacityRows,
        **{column.key: derived[name] for name, column in DERIVED.items()},
        "windows": case.windows.model_dump(mode="json", exclude_unset=True),
        "receive_rows": case.receiveRows,
        "saved_bytes": case.savedBytes,
        "recompute": case.recompute,
        "payload": raw,
    }


def _refresh_summary(session: Session, report_id: int) -> int:
    count, best = session.execute(
        select(func.count(CaseRow.id), func.max(CaseRow.percent_of_peak))
        .where(CaseRow.report_id == report_id)
    ).one()
    session.execute(
        update(ReportRow).where(ReportRow.id == report_id)
        .values(case_count=count, best_percent_of_peak=best)
    )
    return int(count)


def get_report(session: Session, report_id: int) -> ReportRow:
    row = session.get(ReportRow, report_id)
    if row is None:
        raise NotFound(f"report {report_id} does not exist")
    return row


def report_version(session: Session, report_id: int) -> tuple[Any, ...]:
    """A value that changes whenever the report or its cases do (cases are only ever
    appended, which bumps ``updated_at`` and ``case_count``): a cache key, read without
    decoding the report's JSON."""
    return report_columns(session, report_id, ReportRow.created_at, ReportRow.updated_at,
                          ReportRow.case_count)


def report_columns(session: Session, report_id: int, *columns: Any) -> tuple[Any, ...]:
    """Some columns of one report, read without decoding its JSON."""
    row = session.execute(select(*columns).where(ReportRow.id == report_id)).one_or_none()
    if row is None:
        raise NotFound(f"report {report_id} does not exist")
    return tuple(row)


def _list_query(q: str | None, gpu: str | None) -> Select[ReportRow]:
    query = select(ReportRow)
    if gpu:
        query = query.where(ReportRow.gpu == gpu)
    if q:
        # autoescape: '%' and '_' in the search text are literal, not wildcards.
        needle = q.lower()
        query = query.where(or_(
            func.lower(ReportRow.gpu).contains(needle, autoescape=True),
            func.lower(func.coalesce(ReportRow.source, "")).contains(needle, autoescape=True),
            func.lower(ReportRow.date).contains(needle, autoescape=True),
            func.lower(func.coalesce(ReportRow.run_id, "")).contains(needle, autoescape=True),
        ))
    return query


def list_reports(
    session: Session, *, limit: int, offset: int, q: str | None = None, gpu: str | None = None
) -> tuple[list[ReportRow], int]:
    """Newest first."""
    query = _list_query(q, gpu)
    total = session.execute(
        select(func.count()).select_from(query.subquery())
    ).scalar_one()
    rows = session.execute(
        query.order_by(ReportRow.created_at.desc(), ReportRow.id.desc())
        .limit(limit).offset(offset)
    ).scalars().all()
    return list(rows), int(total)


def delete_report(session: Session, report_id: int) -> None:
    row = get_report(session, report_id)
    session.delete(row)
    session.flush()


def report_document(session: Session, report_id: int) -> dict[str, Any]:
    """The report exactly as posted (plus appended cases, in arrival order)."""
    row = get_report(session, report_id)
    payloads = session.execute(
        select(CaseRow.payload).where(CaseRow.report_id == report_id)
        .order_by(CaseRow.position)
    ).scalars().all()
    return {"meta": row.meta, "cases": list(payloads), **(row.extra or {})}


def count_reports(session: Session) -> int:
    return int(session.execute(select(func.count(ReportRow.id))).scalar_one())


def latest_report_id(session: Session) -> int:
    """The newest report's id (as list_reports orders them)."""
    report_id = session.execute(
        select(ReportRow.id).order_by(ReportRow.created_at.desc(), ReportRow.id.desc()).limit(1)
    ).scalar_one_or_none()
    if report_id is None:
        raise NotFound("the database holds no report")
    return int(report_id)
