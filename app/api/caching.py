"""Caching headers of the reads: Cache-Control on every one, and on a report's reads its
version as an ETag, with 304 Not Modified to a client that already holds it."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Response

from app.api.deps import ReadAccess
from app.api.params import ReportId
from app.api.sessions import SessionDep
from app.core.config import get_settings
from app.core.errors import NotModified
from app.services.versions import etag_matches, report_etag


def cache_control() -> str:
    # no-cache: store, but ask each time (a report grows by appends and can be deleted);
    # private when reads need a token, so no shared cache keeps a copy for others.
    return "private, no-cache" if get_settings().require_read_token else "no-cache"


def read_headers(etag: str | None = None) -> dict[str, str]:
    """The caching headers of a read answer (for routes that build their Response)."""
    headers = {"Cache-Control": cache_control()}
    if etag is not None:
        headers["ETag"] = etag
    return headers


def revalidate(response: Response) -> None:
    """Cache-Control on a read whose answer is not one report's (lists, history)."""
    response.headers["Cache-Control"] = cache_control()


def report_version(
    report_id: ReportId, _read: ReadAccess, session: SessionDep, response: Response,
    if_none_match: Annotated[str | None, Header(
        description="an ETag from an earlier answer: 304 while the report is unchanged")] = None,
) -> str:
    """The report's ETag, set on the answer; 304 (raised before the read's work) when the
    client holds it. After the read check: a 304 tells no more than a 200 would."""
    etag = report_etag(session, report_id)
    if etag_matches(if_none_match, etag):
        raise NotModified(etag, cache_control())
    response.headers.update(read_headers(etag))
    return etag


ReportVersion = Annotated[str, Depends(report_version)]
Revalidate = Depends(revalidate)
