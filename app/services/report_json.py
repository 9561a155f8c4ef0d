"""A stored report as ``report.json`` serves it: the exact bytes, which the HTML export's
footer identifies by their SHA-256."""

from __future__ import annotations

import json

from sqlalchemy.orm import Session

from app.repository import reports as reports_repo


def report_json_bytes(session: Session, report_id: int) -> bytes:
    document = reports_repo.report_document(session, report_id)
    # Python's float repr is the shortest round-tripping form: floats come back exact.
    return json.dumps(document, ensure_ascii=False, allow_nan=False).encode("utf-8")
