"""Filters that know the data: each option with how many cases it would show under the other
filters (0: shown disabled), the hint that names the filter to relax when nothing matches,
and the message for a value in the URL that the report does not have. The counts are the
repository's (``repository.cases.option_counts``), filtered as the view's cases are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from app.case_fields import FILTERABLE, CaseField, CaseFilter
from app.services.case_text import display_value
from ingest.words import counted


class FilterOption(TypedDict):
    """A dropdown option as Dash takes it."""

    label: str  # the value and how many cases it would show
    value: str
    disabled: bool


def options(values: Sequence[Any], counts: Mapping[Any, int], chosen: Sequence[Any]
            ) -> list[FilterOption]:
    """A dropdown's options: every value the report has, with its count; a value no case
    matches under the other filters is disabled (unless chosen, so it can be removed)."""
    return [{"label": f"{display_value(v)} ({counts.get(v, 0)})", "value": str(v),
             "disabled": counts.get(v, 0) == 0 and v not in chosen} for v in values]


def all_options(facets: Mapping[str, Sequence[Any]], counts: Mapping[str, Mapping[Any, int]],
                filters: CaseFilter) -> dict[str, list[FilterOption]]:
    """``counts``: per field, the cases each value would show under the other filters
    (repository.cases.option_counts: the same filtering as the view's)."""
    return {f.wire: options(facets.get(f.wire, []), counts.get(f.wire, {}),
                            getattr(filters, f.wire))
            for f in FILTERABLE}


def empty_hint(counts: Mapping[str, Mapping[Any, int]], filters: CaseFilter) -> str:
    """'' when some case matches; else which filter to relax, and what that would show.
    From the option counts: a field's counts are the cases that pass the other filters, so
    those of its chosen values pass them all, and their sum is what dropping it shows."""
    active = filters.active()
    if not active:
        return ""
    first, values = active[0]
    if sum(counts.get(first.wire, {}).get(v, 0) for v in values):
        return ""
    relax = []
    for field, chosen in active:
        freed = sum(counts.get(field.wire, {}).values())
        if freed:
            relax.append(f"{field.wire} ({' or '.join(display_value(v) for v in chosen)}): "
                         f"{counted(freed, 'case')} without it")
    advice = "; ".join(relax) if relax else "more than one filter at once"
    return f"No case matches these filters. Relax {advice}."


def url_problems(query: Mapping[str, Any], facets: Mapping[str, Sequence[Any]]) -> list[str]:
    """A message per value in the URL that filters nothing: not of the field's kind, or not a
    value of this report; each names the parameter and the values that exist."""
    problems = []
    for field in FILTERABLE:
        raw = query.get(field.wire)
        items = raw if isinstance(raw, list) else ([] if raw in (None, "") else [raw])
        for part in (p for item in items for p in str(item).split(",") if p != ""):
            reason = _problem(field, part, facets.get(field.wire, []))
            if reason:
                problems.append(reason)
    return problems


def _problem(field: CaseField, raw: str, existing: Sequence[Any]) -> str:
    have = ", ".join(display_value(v) for v in existing) or "none"
    try:
        value = field.kind(raw)
    except ValueError:
        return (f"{field.wire}={raw!r} is not {_kind_name(field.kind)}: ignored. "
                f"This report has {field.wire} = {have}.")
    if value not in existing:
        return (f"{field.wire}={raw!r} matches no case of this report: ignored. "
                f"It has {field.wire} = {have}.")
    return ""


def _kind_name(kind: type) -> str:
    return {int: "a whole number", float: "a number"}.get(kind, "a valid value")


def known_filters(filters: CaseFilter, facets: Mapping[str, Sequence[Any]]) -> CaseFilter:
    """The filters without the values the report does not have (url_problems names them):
    a mistyped value must not empty the view."""
    return CaseFilter(**{f.wire: [v for v in values if v in facets.get(f.wire, [])]
                         for f, values in filters.active()})
