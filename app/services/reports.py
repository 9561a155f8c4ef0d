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


def _canonical(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def canonical_sha256(value: Any) -> str:
    return hashlib.sha256(_canonical(value)).hexdigest()


def case_hashes(raw_cases: list[dict[str, Any]]) -> list[str]:
    return [canonical_sha256(raw) for raw in raw_cases]


def content_hashes(raw: dict[str, Any]) -> tuple[str, list[str]]:
    """``canonical_sha256`` of the report and of each of its cases, each case encoded once:
    the report's canonical JSON is its keys in order, its cases' canonical JSON joined in
    the middle. (Encoding the report again for its own hash was a third of the JSON an
    ingest wrote.)"""
    case_texts = [_canonical(case) for case in raw["cases"]]
    whole = hashlib.sha256(b"{")
    for i, key in enumerate(sorted(raw)):
        whole.update(b"," * (i > 0) + _canonical(key) + b":")
        if key == "cases":
            whole.update(b"[" + b",".join(case_texts) + b"]")
        else:
            whole.update(_canonical(raw[key]))
    whole.update(b"}")
    return whole.hexdigest(), [hashlib.sha256(text).hexdigest() for text in case_texts]


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
    sha, hashes = content_hashes(raw)
    if report.meta.runId is None:
        grown = _grown_into(session, sha)
        if grown is not None:
            return IngestResult(grown, len(report.cases), created=False)
    extra = {k: v for k, v in raw.items() if k not in ("meta", "cases")}
    new_id = reports_repo.insert_report(
        session, content_sha256=sha, current_sha256=sha, run_id=report.meta.runId,
        date=report.meta.date, gpu=report.meta.gpu, series=series_context(raw["meta"]),
        provenance=provenance_key(raw["meta"]), source=report.meta.source,
        meta=raw["meta"], extra=extra,
        body=report_body.encode(raw["meta"], raw["cases"], extra),
    )
    if new_id is not None:
        _insert_cases(session, new_id, report.meta, report.cases, hashes, start=0)
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


def _grown_into(session: Session, sha: str) -> int | None:
    """The stored report that appends made into exactly this content: a streamed report
    posted whole afterwards (report.json as it stands) is that report, not a new one.

    A runId already names the report it repeats, and the content it was first posted with
    is caught by the insert's ON CONFLICT; this looks only where neither applies, by the
    hash of each report's current content (one index probe, whatever the day holds). Read
    before the insert: concurrent posts of the same whole file all find the grown report,
    and where none exists yet they race on the content hash's unique constraint as any
    first post does."""
    return reports_repo.grown_into(session, sha)


def append_cases(
    session: Session, report_id: int, raw_cases: list[dict[str, Any]], cases: list[Case]
) -> AppendResult:
    """Append cases; an id already stored is a no-op when identical, else a 409."""
    meta = Meta.model_validate(reports_repo.hold_report(session, report_id))
    ids = [c.id for c in cases]
    hashes = case_hashes(raw_cases)
    stored = reports_repo.stored_case_hashes(session, report_id, ids)
    conflicts = [
        case_id for case_id, sha in zip(ids, hashes, strict=True)
        if case_id in stored and stored[case_id] != sha
    ]
    if conflicts:
        raise Conflict(
            f"case id(s) already stored with different content: {', '.join(conflicts)}"
        )
    new = [(raw, case, sha) for raw, case, sha in zip(raw_cases, cases, hashes, strict=True)
           if case.id not in stored]
    if new:
        _insert_cases(session, report_id, meta, [c for _, c, _ in new], [h for _, _, h in new],
                      reports_repo.next_position(session, report_id))
        grown = report_body.appended(reports_repo.report_body(session, report_id),
                                     [r for r, _, _ in new])
        reports_repo.set_report_body(session, report_id, report_body.encode_document(grown),
                                     canonical_sha256(grown))
    count = reports_repo.refresh_summary(session, report_id)
    if new:
        alerts.open_alerts(session, report_id)
    return AppendResult(added=len(new), unchanged=len(cases) - len(new), case_count=count)


def _insert_cases(
    session: Session, report_id: int, meta: Meta, cases: list[Case], hashes: list[str],
    start: int,
) -> None:
    rows, all_caveats = case_rows(report_id, meta, cases, hashes, start)
    reports_repo.insert_cases(session, report_id, rows, all_caveats)


def case_rows(
    report_id: int, meta: Meta, cases: list[Case], hashes: list[str], start: int
) -> tuple[list[dict[str, Any]], list[list[Caveat]]]:
    """The ``cases`` rows to insert, and each case's caveats (pure: no database).
    ``hashes``: each case's as posted (``case_hashes``), computed once by the caller."""
    rows = []
    all_caveats = []
    for offset, (case, sha) in enumerate(zip(cases, hashes, strict=True)):
        derived = derive(meta, case)
        all_caveats.append(caveats(meta, case, derived))
        rows.append(_case_row(report_id, start + offset, sha, case, derived.as_dict()))
    return rows, all_caveats


def _case_row(
    report_id: int, position: int, sha: str, case: Case, derived: dict[str, Any]
) -> dict[str, Any]:
    return {
        "report_id": report_id,
        "position": position,
        "content_sha256": sha,
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
