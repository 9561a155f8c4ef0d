"""All queries on reports and on the cases as they are written. Nothing here commits: the
request (or CLI command) boundary does, once (``app.core.db.transaction``), so a report
lands whole. What to write is decided in ``app.services.reports``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, exists, func, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased

from app.core.errors import Conflict, NotFound
from app.models import Base, CaseRow, ReportRow, utcnow
from ingest.derived import Caveat
from ingest.ties import NEVER_BEST

# Core tables for the bulk inserts: the ORM's bulk path only adds per-row bookkeeping.
_CASES = Base.metadata.tables["cases"]
_CAVEATS = Base.metadata.tables["caveats"]


def insert_report(
    session: Session, *, content_sha256: str, current_sha256: str, run_id: str | None,
    date: str, gpu: str,
    series: str, provenance: str, source: str | None, meta: dict[str, Any],
    extra: dict[str, Any], body: bytes,
) -> int | None:
    """The new report's id, or None when one with the same content or runId is stored.

    INSERT ... ON CONFLICT DO NOTHING: concurrent identical posts race on the unique
    constraint inside the database instead of on a check-then-insert in Python."""
    stmt = _insert_ignoring_conflicts(session, ReportRow).values(
        content_sha256=content_sha256, current_sha256=current_sha256, run_id=run_id, date=date,
        gpu=gpu, series=series, provenance=provenance, source=source, meta=meta, extra=extra,
        body=body, case_count=0,
        created_at=utcnow(), updated_at=utcnow(),
    ).returning(ReportRow.id)
    return session.execute(stmt).scalar_one_or_none()


def _insert_ignoring_conflicts(session: Session, table: Any) -> Any:
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    raise NotImplementedError(f"unsupported database dialect {dialect!r}")


def find_repeat(session: Session, content_sha256: str, run_id: str | None) -> int:
    """The stored report with this content or this runId."""
    conditions = [ReportRow.content_sha256 == content_sha256]
    if run_id is not None:
        conditions.append(ReportRow.run_id == run_id)
    found = session.execute(select(ReportRow.id).where(or_(*conditions))).scalars().first()
    if found is None:
        # The conflicting row was deleted between our insert and this read.
        raise Conflict("the report conflicted with another being written; retry")
    return found


def grown_into(session: Session, current_sha256: str) -> int | None:
    """The first report stored under other content whose cases appended since make its
    content ``current_sha256`` now. (Equal content means an equal meta, runId included.)"""
    return session.execute(
        select(ReportRow.id).where(ReportRow.current_sha256 == current_sha256,
                                   ReportRow.content_sha256 != current_sha256)
        .order_by(ReportRow.id).limit(1)
    ).scalar_one_or_none()


def case_count(session: Session, report_id: int) -> int:
    return int(session.execute(
        select(ReportRow.case_count).where(ReportRow.id == report_id)
    ).scalar_one())


def hold_report(session: Session, report_id: int) -> dict[str, Any]:
    """Touch the report row and return its meta. Touching it first serialises writes to one
    report (row lock on Postgres, the write lock on SQLite), so positions and the summary
    stay coherent."""
    meta = session.execute(
        update(ReportRow).where(ReportRow.id == report_id).values(updated_at=utcnow())
        .returning(ReportRow.meta)
    ).scalar_one_or_none()
    if meta is None:
        raise NotFound(f"report {report_id} does not exist")
    return dict(meta)


def stored_case_hashes(session: Session, report_id: int, case_ids: list[str]) -> dict[str, str]:
    """Case id -> content hash of those of ``case_ids`` the report holds."""
    return dict(session.execute(
        select(CaseRow.case_id, CaseRow.content_sha256)
        .where(CaseRow.report_id == report_id, CaseRow.case_id.in_(case_ids))
    ).all())


def next_position(session: Session, report_id: int) -> int:
    return int(session.execute(
        select(func.coalesce(func.max(CaseRow.position) + 1, 0))
        .where(CaseRow.report_id == report_id)
    ).scalar_one())


def insert_cases(
    session: Session, report_id: int, rows: list[dict[str, Any]],
    caveats_per_row: list[list[Caveat]],
) -> None:
    """Write case rows (all of one report, positions from the first row's on, the report
    held: see ``hold_report``) and each row's caveats."""
    if not rows:
        return
    # A plain executemany, not INSERT ... RETURNING: with RETURNING, SQLAlchemy sends one
    # statement of rows x columns placeholders, which psycopg re-parses in Python on every
    # call (too long for its cache): that was half the time of a 63-case ingest. The
    # executemany is one cached statement, pipelined; the ids follow in one query.
    session.execute(insert(_CASES), rows)
    if not any(caveats_per_row):
        return
    pk_of = dict(session.execute(
        select(CaseRow.position, CaseRow.id)
        .where(CaseRow.report_id == report_id, CaseRow.position >= rows[0]["position"])
    ).all())
    caveat_rows = [
        {"case_pk": pk_of[row["position"]], "code": c.code, "message": c.message}
        for row, row_caveats in zip(rows, caveats_per_row, strict=True)
        for c in row_caveats
    ]
    session.execute(insert(_CAVEATS), caveat_rows)


def refresh_summary(session: Session, report_id: int) -> int:
    """Recount the report's cases, its data errors (cases caveated so that they can be
    no one's best) and its best % of peak among the others; returns the count."""
    erroneous = exists().where(_CAVEATS.c.case_pk == CaseRow.id,
                               _CAVEATS.c.code.in_(sorted(NEVER_BEST)))
    count, errors, best = session.execute(
        select(func.count(CaseRow.id), func.count(CaseRow.id).filter(erroneous),
               func.max(CaseRow.percent_of_peak).filter(~erroneous))
        .where(CaseRow.report_id == report_id)
    ).one()
    session.execute(
        update(ReportRow).where(ReportRow.id == report_id)
        .values(case_count=count, data_error_count=errors, best_percent_of_peak=best)
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


def report_body(session: Session, report_id: int) -> bytes:
    """The report's stored body (``app.report_body``): report.json, compressed."""
    body = session.execute(
        select(ReportRow.body).where(ReportRow.id == report_id)
    ).scalar_one_or_none()
    if body is None:
        raise NotFound(f"report {report_id} does not exist")
    return bytes(body)


def set_report_body(session: Session, report_id: int, body: bytes, current_sha256: str) -> None:
    """The report's body after an append, with the hash of its content now."""
    session.execute(update(ReportRow).where(ReportRow.id == report_id)
                    .values(body=body, current_sha256=current_sha256))


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


def newest_per_gpu(session: Session, limit: int) -> list[tuple[int, str]]:
    """(id, gpu) of the newest report (as list_reports orders them) of each GPU, newest
    first, at most ``limit``. The GPUs by a loose scan of ix_reports_gpu (each the least
    name past the one before), each one's newest by ix_reports_created_at_id: a probe or
    two per GPU, where a window over every report took 30 ms at 10,000 reports."""
    step = aliased(ReportRow)
    gpus = select(func.min(ReportRow.gpu).label("gpu")).cte("gpus", recursive=True)
    gpus = gpus.union_all(
        select(select(func.min(step.gpu)).where(step.gpu > gpus.c.gpu).scalar_subquery())
        .where(gpus.c.gpu.is_not(None)))
    newest = aliased(ReportRow)
    newest_first = (newest.created_at.desc(), newest.id.desc())

    def of_newest(column: Any) -> Any:
        return (select(column).where(newest.gpu == gpus.c.gpu).order_by(*newest_first)
                .limit(1).scalar_subquery())

    # Ordered here, not by the database: joining back to reports read every row.
    found = session.execute(
        select(gpus.c.gpu, of_newest(newest.id), of_newest(newest.created_at))
        .where(gpus.c.gpu.is_not(None))
    ).all()
    rows = sorted(((i, gpu, at) for gpu, i, at in found), key=lambda r: (r[2], r[0]),
                  reverse=True)[:limit]
    return [(int(i), str(gpu)) for i, gpu, _ in rows]


def report_versions(session: Session, report_ids: Sequence[int]) -> list[tuple[Any, ...]]:
    """``report_version`` of each report, in the order given, in one query."""
    rows = {int(r[0]): tuple(r[1:]) for r in session.execute(
        select(ReportRow.id, ReportRow.created_at, ReportRow.updated_at, ReportRow.case_count)
        .where(ReportRow.id.in_(list(report_ids))))}
    for report_id in report_ids:
        if report_id not in rows:
            raise NotFound(f"report {report_id} does not exist")
    return [rows[i] for i in report_ids]
