"""A stored report as ``report.json`` serves it: the exact bytes, which the HTML export's
footer identifies by their SHA-256."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app import report_body
from app.repository import reports as reports_repo


def report_json_bytes(session: Session, report_id: int) -> bytes:
    return report_body.json_bytes(reports_repo.report_body(session, report_id))
