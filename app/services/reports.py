"""Ingesting reports: validation, dedup (same content or runId), merging a resent run,
appending cases, and each case's row with its derived metrics and caveats. Between the
routes (and the CLI) and the repository: it decides what to write, the repository writes
it, the caller commits (``app.core.db.transaction``)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from sqlalchemy.orm import Session

from app import case_fields, report_body
from app.core.errors import Conflict
from app.repository import reports as reports_repo
from app.services import alerts
from ingest.derived import Caveat, caveats, derive
from ingest.provenance import provenance_key
from ingest.schema import Case, Meta, Report
from ingest.series import series_context
from ingest.validate import validate_case_list, validate_report


@dataclass(frozen=True)
class IngestResult:
    id: int
    case_count: int
    created: bool
    cases_added: int = 0


@dataclass(frozen=True)
class AppendResult:
    added: int
    unchanged: int
    case_count: int


def canonical_sha256(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ingest(session: Session, raw: Any) -> IngestResult:
    """Validate a parsed report body and store it: what ``POST /reports`` and
    ``moescope ingest`` both do. Raises ``InvalidPayload`` naming every problem."""
    return ingest_report(session, raw, validate_report(raw))


def append(session: Session, report_id: int, raw: Any) -> AppendResult:
    """Validate a parsed ``{"cases": [...]}`` body and append its cases."""
    case_list = validate_case_list(raw)
    return append_cases(session, report_id, raw["cases"], case_list.cases)


def ingest_report(session: Session, raw: dict[str, Any], report: Report) -> IngestResult:
    """Store a validated report, or find the one it repeats (same content or runId).

    ``raw`` is the parsed JSON as posted; it is what ``report.json`` gives back."""
    sha = canonical_sha256(raw)
    if report.meta.runId is None:
        grown = _grown_into(session, sha, report, raw)
        if grown is not None:
            return IngestResult(grown, len(report.cases), created=False)
    extra = {k: v for k, v in raw.items() if k not in ("meta", "cases")}
    new_id = reports_repo.insert_report(
        session, content_sha256=sha, run_id=report.meta.runId, date=report.meta.date,
        gpu=report.meta.gpu, series=series_context(raw["meta"]),
        provenance=provenance_key(raw["meta"]), source=report.meta.source,
        meta=raw["meta"], extra=extra,
        body=report_body.encode(raw["meta"], raw["cases"], extra),
    )
    if new_id is not None:
        _insert_cases(session, new_id, report.meta, raw["cases"], report.cases, start=0)
        count = reports_repo.refresh_summary(session, new_id)
        if count:
            alerts.open_alerts(session, new_id)
        return IngestResult(new_id, count, created=True, cases_added=count)

    existing = reports_repo.find_repeat(session, sha, report.meta.runId)
    # The same runId with more cases is a runner resending: merge like an append.
    added = 0
    if report.cases:
        added = append_cases(session, existing, raw["cases"], report.cases).added
    return IngestResult(existing, reports_repo.case_count(session, existing), created=False,
                        cases_added=added)


def _grown_into(session: Session, sha: str, report: Report, raw: dict[str, Any]) -> int | None:
    """The stored report that appends made into exactly this content: a streamed report
    posted whole afterwards (report.json as it stands) is that report, not a new one.

    A runId already names the report it repeats, and the content it was first posted with
    is caught by the insert's ON CONFLICT; this looks only where neither applies. Read
    before the insert: concurrent posts of the same whole file all find the grown report,
    and where none exists yet they race on the content hash's unique constraint as any
    first post does."""
    candidates = reports_repo.same_shape_reports(
        session, content_sha256=sha, date=report.meta.date, gpu=report.meta.gpu,
        series=series_context(raw["meta"]), case_count=len(report.cases))
    for report_id in candidates:
        stored = report_body.document(reports_repo.report_body(session, report_id))
        if canonical_sha256(stored) == sha:
            return report_id
    return None


def append_cases(
    session: Session, report_id: int, raw_cases: list[dict[str, Any]], cases: list[Case]
) -> AppendResult:
    """Append cases; an id already stored is a no-op when identical, else a 409."""
    meta = Meta.model_validate(reports_repo.hold_report(session, report_id))
    ids = [c.id for c in cases]
    stored = reports_repo.stored_case_hashes(session, report_id, ids)
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
        _insert_cases(session, report_id, meta, [r for r, _ in new], [c for _, c in new],
                      reports_repo.next_position(session, report_id))
        body = reports_repo.report_body(session, report_id)
        reports_repo.set_report_body(session, report_id,
                                     report_body.appended(body, [r for r, _ in new]))
    count = reports_repo.refresh_summary(session, report_id)
    if new:
        alerts.open_alerts(session, report_id)
    return AppendResult(added=len(new), unchanged=len(cases) - len(new), case_count=count)


def _insert_cases(
    session: Session, report_id: int, meta: Meta, raw_cases: list[dict[str, Any]],
    cases: list[Case], start: int,
) -> None:
    rows, all_caveats = case_rows(report_id, meta, raw_cases, cases, start)
    reports_repo.insert_cases(session, report_id, rows, all_caveats)


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
        "content_sha256": canonical_sha256(raw),
        **{f.column: _column_value(getattr(case, f.wire)) for f in case_fields.STORED
           if f.column},
        **{f.column: derived[f.wire] for f in case_fields.DERIVED if f.column},
        "window_min_ms": min(case.windows.combined, default=None),
        "window_max_ms": max(case.windows.combined, default=None),
        **{f"phase_{name}_ms": getattr(case.phaseMS, name) if case.phaseMS else None
           for name in ("dispatch", "experts", "combine")},
    }


def _column_value(value: Any) -> Any:
    # A nested object (the windows) is stored as its wire JSON, keys it did not send left out.
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    return value


def delete(session: Session, report_id: int) -> None:
    """The report and its cases; NotFound when there is no such report."""
    reports_repo.delete_report(session, report_id)
