"""One report as its page and its export read it: the header, every case (held by a
ReportCache per report version) and the view for one set of filters.

Queries go through the repositories and derived metrics come from the stored columns
(computed by ``ingest.derived`` at ingestion), exactly as the API serves them.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any

from sqlalchemy.orm import Session

from app.case_fields import CaseFilter
from app.case_view import CaseView, frozen
from app.repository import cases as cases_repo
from app.repository import reports as reports_repo
from app.services import cases as case_service
from app.services.case_table import table_row, table_rows
from app.services.chart_panels import ChartPanel, cap_banner, chart_cases, chart_panels


@dataclass(frozen=True)
class ReportHeader:
    id: int
    date: str
    gpu: str
    source: str
    run_id: str
    shape: Mapping[str, Any]
    peaks: tuple[tuple[str, str], ...]
    case_count: int


def _header(row: Any) -> ReportHeader:
    meta = row.meta
    peaks = [(f"{name} dense", f"{value:g} TFLOP/s per GPU")
             for name, value in (meta.get("theoreticalTFPerGPU") or {}).items()]
    for key, label in (("theoreticalHBMGBps", "HBM"),
                       ("theoreticalNVLinkGBpsPerDirection", "NVLink per direction"),
                       ("theoreticalNVLinkGBpsBidirectional", "NVLink bidirectional")):
        if meta.get(key) is not None:
            peaks.append((label, f"{meta[key]:g} GB/s"))
    return ReportHeader(id=row.id, date=row.date, gpu=row.gpu, source=row.source or "",
                        run_id=row.run_id or "", shape=frozen(meta.get("shape") or {}),
                        peaks=tuple(peaks), case_count=row.case_count)


@dataclass(frozen=True)
class ReportData:
    """One report as the report page reads it: every case (typed, from what the API's
    case_out gives, in report order), its table row, the filter options. Read-only
    throughout (see ``frozen``): one ReportData serves every view of the report in the
    process."""

    header: ReportHeader
    meta: Mapping[str, Any]
    cases: tuple[CaseView, ...]
    rows: tuple[Mapping[str, Any], ...]  # the table row of each case, aligned with ``cases``
    facets: Mapping[str, tuple[Any, ...]]
    index: Mapping[str, int]  # case id -> its position in ``cases``


# A filter change must not re-read and re-decode every case of a large report: the last
# few reports viewed stay in memory.
REPORT_CACHE_SIZE = 4


class ReportCache:
    """The last ``size`` reports read, each under its version (see
    repository.reports.report_version), so an append, or a report deleted and another
    stored under its id, is never served stale. The app creates one (create_app); a
    one-off reader (the CLI's export) makes its own."""

    def __init__(self, size: int = REPORT_CACHE_SIZE) -> None:
        self.size = size
        self._reports: OrderedDict[tuple[Any, ...], ReportData] = OrderedDict()
        self._lock = threading.Lock()

    def report(self, session: Session, report_id: int) -> ReportData:
        key = (str(session.get_bind().engine.url), report_id,
               *reports_repo.report_version(session, report_id))
        with self._lock:
            hit = self._reports.get(key)
            if hit is not None:
                self._reports.move_to_end(key)
                return hit
        # Read outside the lock: another report's views need not wait for this one.
        loaded = _read(session, report_id)
        if not key[-1] == loaded.header.case_count == len(loaded.cases):
            return loaded  # an append landed between our reads: serve it, cache nothing
        with self._lock:
            self._reports[key] = loaded
            while len(self._reports) > self.size:
                self._reports.popitem(last=False)
        return loaded

    def clear(self) -> None:
        with self._lock:
            self._reports.clear()


def _read(session: Session, report_id: int) -> ReportData:
    row = reports_repo.get_report(session, report_id)
    cases = tuple(case_service.case_views(session, report_id))
    return ReportData(
        header=_header(row), meta=frozen(row.meta), cases=cases,
        rows=frozen(table_rows(cases)), facets=frozen(cases_repo.facets(session, report_id)),
        index=MappingProxyType({c.id: i for i, c in enumerate(cases)}))


@dataclass(frozen=True)
class ReportView:
    """Everything the report page draws for one set of filters. Its cases are the cache's
    read-only ones; its lists and rows are the caller's own."""

    header: ReportHeader
    meta: Mapping[str, Any]
    filters: CaseFilter
    cases: list[CaseView]  # every case in view
    charted: list[CaseView]  # the ones the charts draw
    caveats: dict[str, int]  # caveat code -> cases in view that carry it
    panels: list[ChartPanel]
    facets: Mapping[str, tuple[Any, ...]]
    every_case: Sequence[CaseView]  # the whole report, in view or not (the filters' counts)
    every_row: Sequence[Mapping[str, Any]]  # the whole report's table rows (the cache's)
    picked: Sequence[int]  # where the cases in view are in the report

    @cached_property
    def rows(self) -> list[dict[str, Any]]:
        """The table's rows of the cases in view, as plain dicts (the caller's own); made
        when asked for: the filter callback sends none (the table asks apart)."""
        return [dict(self.every_row[i]) for i in self.picked]

    @property
    def count_text(self) -> str:
        return f"{len(self.cases)} of {self.header.case_count} cases in view"

    @property
    def banner(self) -> str:
        return cap_banner(len(self.charted), len(self.cases))


def report_view(reports: ReportCache, session: Session, report_id: int, filters: CaseFilter,
                hover_marks: Mapping[str, str] | None = None) -> ReportView:
    """``hover_marks``: case id -> a note the charts' hover adds to that case's id (the
    cases that moved against their history)."""
    report = reports.report(session, report_id)
    picked = _picked(session, report, filters)
    cases = [report.cases[i] for i in picked]
    # Copies of the few marked cases only: the cached ones are shared by every view.
    charted = [dataclasses.replace(c, hover_mark=hover_marks[c.id])
               if hover_marks and c.id in hover_marks else c for c in chart_cases(cases)]
    caveats = cases_repo.caveat_counts(session, report_id, filters)
    return ReportView(header=report.header, meta=report.meta, filters=filters, cases=cases,
                      charted=charted, caveats=caveats,
                      panels=chart_panels(report.meta, cases, caveats, charted),
                      facets=report.facets, every_case=report.cases, every_row=report.rows,
                      picked=picked)


def view_rows(reports: ReportCache, session: Session, report_id: int, filters: CaseFilter
              ) -> list[dict[str, Any]]:
    """The case table's rows of the cases in view (``ReportView.rows`` without the rest)."""
    report = reports.report(session, report_id)
    return [dict(report.rows[i]) for i in _picked(session, report, filters)]


def _picked(session: Session, report: ReportData, filters: CaseFilter) -> list[int]:
    """Where in ``report.cases`` the cases that pass the filters are. The database decides
    which pass (one implementation of filtering); the cached cases are not decoded again."""
    if not filters.active():
        return list(range(len(report.cases)))
    return [report.index[case_id]
            for case_id in cases_repo.case_ids(session, report.header.id, filters)
            if case_id in report.index]  # a case appended since the report was cached


def csv_rows(reports: ReportCache, session: Session, report_id: int,
             shown: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The exact rows of the cases the grid shows, in its order (its numbers are rounded)."""
    report = reports.report(session, report_id)
    return [table_row(report.cases[report.index[row["id"]]])
            for row in shown if row.get("id") in report.index]
