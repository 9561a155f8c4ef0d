"""One report as its page reads it: the header, every case (cached per report version) and
the view for one set of filters.

Queries go through the repositories and derived metrics come from the stored columns
(computed by ``ingest.derived`` at ingestion), exactly as the API serves them.
"""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.case_fields import CaseFilter
from app.dashboard.filters import search_from_filters
from app.figures import Case
from app.repository import cases as cases_repo
from app.repository import reports as reports_repo
from app.services import cases as case_service
from app.services.case_table import table_row, table_rows
from app.services.chart_panels import ChartPanel, cap_banner, chart_cases, chart_panels


@dataclass
class ReportHeader:
    id: int
    date: str
    gpu: str
    source: str
    run_id: str
    shape: dict[str, Any]
    peaks: list[tuple[str, str]]
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
                        run_id=row.run_id or "",
                        shape=dict(meta.get("shape") or {}), peaks=peaks,
                        case_count=row.case_count)


@dataclass(frozen=True)
class ReportData:
    """One report as the report page reads it: every case (as the API's case_out gives
    it, in report order), its table row, the filter options. Shared by every view of the
    report in this process: read-only."""

    header: ReportHeader
    meta: dict[str, Any]
    cases: list[Case]
    rows: list[dict[str, Any]]  # the table row of each case, aligned with ``cases``
    facets: dict[str, list[Any]]
    index: dict[str, int]  # case id -> its position in ``cases``


# A filter change must not re-read and re-decode every case of a large report: the last
# few reports viewed stay in memory, each under its version (see report_version), so an
# append (or a report deleted and another stored) is never served stale.
REPORT_CACHE_SIZE = 4
_report_cache: OrderedDict[tuple[Any, ...], ReportData] = OrderedDict()
_report_cache_lock = threading.Lock()


def report_data(session: Session, report_id: int) -> ReportData:
    key = (str(session.get_bind().engine.url), report_id,
           *reports_repo.report_version(session, report_id))
    with _report_cache_lock:
        hit = _report_cache.get(key)
        if hit is not None:
            _report_cache.move_to_end(key)
            return hit
    # Read outside the lock: another report's views need not wait for this one.
    row = reports_repo.get_report(session, report_id)
    cases = case_service.view_cases(session, report_id)
    loaded = ReportData(header=_header(row), meta=dict(row.meta), cases=cases,
                        rows=table_rows(cases), facets=cases_repo.facets(session, report_id),
                        index={c["id"]: i for i, c in enumerate(cases)})
    if not key[-1] == loaded.header.case_count == len(cases):
        return loaded  # an append landed between our reads: serve it, cache nothing
    with _report_cache_lock:
        _report_cache[key] = loaded
        while len(_report_cache) > REPORT_CACHE_SIZE:
            _report_cache.popitem(last=False)
    # A large report is millions of long-lived objects, which every full garbage collection
    # would walk again (300 ms pauses in filter callbacks): move what lives now out of the
    # collector's sight. Frozen objects are still freed by reference counting on eviction;
    # collecting first leaves no cyclic garbage frozen.
    gc.collect()
    gc.freeze()
    return loaded


@dataclass
class ReportView:
    """Everything the report page draws for one set of filters."""

    header: ReportHeader
    meta: dict[str, Any]
    filters: CaseFilter
    cases: list[Case]  # every case in view
    charted: list[Case]  # the ones the charts draw
    caveats: dict[str, int]  # caveat code -> cases in view that carry it
    panels: list[ChartPanel]
    rows: list[dict[str, Any]]
    facets: dict[str, list[Any]]

    @property
    def count_text(self) -> str:
        return f"{len(self.cases)} of {self.header.case_count} cases in view"

    @property
    def banner(self) -> str:
        return cap_banner(len(self.charted), len(self.cases))

    @property
    def search(self) -> str:
        return search_from_filters(self.filters)


def report_view(session: Session, report_id: int, filters: CaseFilter,
                hover_marks: Mapping[str, str] | None = None) -> ReportView:
    """``hover_marks``: case id -> a note the charts' hover adds to that case's id (the
    cases that moved against their history)."""
    report = report_data(session, report_id)
    picked = _picked(session, report, filters)
    cases = [report.cases[i] for i in picked]
    # Copies of the few marked cases only: the cached ones are shared by every view.
    charted = [{**c, "hoverMark": hover_marks[c["id"]]} if hover_marks and c["id"] in hover_marks
               else c for c in chart_cases(cases)]
    caveats = cases_repo.caveat_counts(session, report_id, filters)
    return ReportView(header=report.header, meta=report.meta, filters=filters, cases=cases,
                      charted=charted, caveats=caveats,
                      panels=chart_panels(report.meta, cases, caveats, charted),
                      rows=[report.rows[i] for i in picked], facets=report.facets)


def _picked(session: Session, report: ReportData, filters: CaseFilter) -> list[int]:
    """Where in ``report.cases`` the cases that pass the filters are. The database decides
    which pass (one implementation of filtering); the cached cases are not decoded again."""
    if not filters.active():
        return list(range(len(report.cases)))
    return [report.index[case_id]
            for case_id in cases_repo.case_ids(session, report.header.id, filters)
            if case_id in report.index]  # a case appended since the report was cached


def csv_rows(session: Session, report_id: int,
             shown: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The exact rows of the cases the grid shows, in its order (its numbers are rounded)."""
    report = report_data(session, report_id)
    return [table_row(report.cases[report.index[row["id"]]])
            for row in shown if row.get("id") in report.index]
