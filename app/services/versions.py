"""A stored report's version, as an HTTP entity tag: reads of one report answer 304 to a
client that holds the version it names."""

from __future__ import annotations

import hashlib
from importlib.metadata import PackageNotFoundError, version

from sqlalchemy.orm import Session

from app.repository import reports as reports_repo

try:
    # Part of the tag: an upgrade may change what a read of the same rows looks like.
    _APP_VERSION = version("moescope")
except PackageNotFoundError:  # a source tree run without installing
    _APP_VERSION = "source"


def report_etag(session: Session, report_id: int) -> str:
    """A weak tag (the answer may be gzipped or not) that changes whenever the report does:
    its cases are only ever appended, which moves ``updated_at`` and ``case_count``, and
    ``created_at`` tells a deleted report's reused id from the new report. Raises NotFound."""
    created, updated, case_count = reports_repo.report_version(session, report_id)
    key = f"{_APP_VERSION}|{report_id}|{created.isoformat()}|{updated.isoformat()}|{case_count}"
    return f'W/"{hashlib.sha256(key.encode()).hexdigest()[:24]}"'


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110's weak comparison of an If-None-Match header against ``etag``."""
    if if_none_match is None:
        return False
    if if_none_match.strip() == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == opaque for tag in if_none_match.split(","))
