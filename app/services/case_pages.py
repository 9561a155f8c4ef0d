"""``GET /reports/{id}/cases``' pages, kept per report version: a page reads every row of
the report and decodes its body (most of the request's time), and is the same until the
report changes, which moves its version (``app.services.versions.report_etag``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from sqlalchemy.orm import Session

from app.case_fields import CaseFilter
from app.services import cases as case_service

# Pages of the last few reports and queries read: a client polling a report, the
# dashboard's links and a CLI's reads ask for the same few.
PAGE_CACHE_SIZE = 32

Page = tuple[list[dict[str, Any]], int]
_pages: OrderedDict[tuple[Any, ...], Page] = OrderedDict()
_lock = threading.Lock()


def case_page(session: Session, report_id: int, version: str, *, filters: CaseFilter,
              sort: str, descending: bool, limit: int, offset: int) -> Page:
    """``app.services.cases.case_page`` for the report at ``version`` (its ETag, read by
    the caller before): read once per version and query. The items are shared between
    requests: callers read them, never change them."""
    key = (str(session.get_bind().engine.url), report_id, version,
           tuple((f.wire, tuple(values)) for f, values in filters.active()),
           sort, descending, limit, offset)
    with _lock:
        hit = _pages.get(key)
        if hit is not None:
            _pages.move_to_end(key)
            return hit
    # Read outside the lock. A page read just after an append, under the version before
    # it, holds more than that version, never less; and a version once passed is never
    # read again (appends only move it on), so no request is answered from that entry.
    page = case_service.case_page(session, report_id, filters=filters, sort=sort,
                                  descending=descending, limit=limit, offset=offset)
    with _lock:
        _pages[key] = page
        while len(_pages) > PAGE_CACHE_SIZE:
            _pages.popitem(last=False)
    return page
