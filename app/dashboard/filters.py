"""The report page's filters and the URL query that keeps them, so a view can be shared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs, urlencode

from app.case_fields import FILTERABLE, CaseFilter


def _coerce(kind: type, raw: str) -> Any:
    try:
        return kind(raw)
    except ValueError:
        return None  # a hand-edited URL with a bad value filters nothing rather than failing


def filters_from_query(query: Mapping[str, Any]) -> CaseFilter:
    """Filters from URL query values: each a list, a comma-separated string, or absent."""
    values: dict[str, list[Any]] = {}
    for field in FILTERABLE:
        raw = query.get(field.wire)
        items = raw if isinstance(raw, list) else ([] if raw in (None, "") else [raw])
        parts = [p for item in items for p in str(item).split(",") if p != ""]
        values[field.wire] = [v for v in (_coerce(field.kind, p) for p in parts)
                              if v is not None]
    return CaseFilter(**values)


def filters_from_search(search: str) -> CaseFilter:
    return filters_from_query(parse_qs(search.lstrip("?")))


def api_query(filters: CaseFilter) -> str:
    """The filters as the API takes them: each value its own parameter, no comma lists."""
    pairs = [(f.wire, query_value(v)) for f, values in filters.active() for v in values]
    return "?" + urlencode(pairs) if pairs else ""


def search_from_filters(filters: CaseFilter) -> str:
    """The URL query of a filtered view ('' when nothing is filtered)."""
    pairs = [(f.wire, ",".join(query_value(v) for v in values))
             for f, values in filters.active()]
    return "?" + urlencode(pairs, safe=",") if pairs else ""


def query_value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def filters_from_controls(values: Sequence[Sequence[Any] | None]) -> CaseFilter:
    """Filters from the page's dropdowns, in FILTERABLE order."""
    return filters_from_query({f.wire: [str(v) for v in (value or [])]
                               for f, value in zip(FILTERABLE, values, strict=True)})
