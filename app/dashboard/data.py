"""What the dashboard pages show, as plain functions: the page callbacks only call these.

Queries go through the repositories and derived metrics come from the stored columns
(computed by ``ingest.derived`` at ingestion), exactly as the API serves them.
"""

from __future__ import annotations

import csv
import gc
import heapq
import io
import json
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from sqlalchemy.orm import Session

from app import figures
from app.api.schemas import case_dict, case_out
from app.core.db import get_engine
from app.repository import cases as cases_repo
from app.repository import reports as reports_repo
from app.repository.cases import CaseFilter
from ingest.derived import ReportNote, report_notes

Case = dict[str, Any]

CHANGE_THRESHOLD_PERCENT = 5.0
REPORT_LIST_LIMIT = 500


@contextmanager
def session_scope() -> Iterator[Session]:
    """A read-only session for one page render or callback."""
    with Session(get_engine()) as session:
        yield session


# --- URL query <-> filters ---------------------------------------------------------------

FILTER_FIELDS: tuple[tuple[str, type], ...] = (
    ("mode", str), ("ep", int), ("precision", str), ("pipeline", str), ("category", str),
    ("F", int), ("imbalance", float),
)


def _coerce(kind: type, raw: str) -> Any:
    try:
        return kind(raw)
    except ValueError:
        return None  # a hand-edited URL with a bad value filters nothing rather than failing


def filters_from_query(query: Mapping[str, Any]) -> CaseFilter:
    """Filters from URL query values: each a list, a comma-separated string, or absent."""
    values: dict[str, list[Any]] = {}
    for name, kind in FILTER_FIELDS:
        raw = query.get(name)
        items = raw if isinstance(raw, list) else ([] if raw in (None, "") else [raw])
        parts = [p for item in items for p in str(item).split(",") if p != ""]
        values[name] = [v for v in (_coerce(kind, p) for p in parts) if v is not None]
    return CaseFilter(**values)


def filters_from_search(search: str) -> CaseFilter:
    return filters_from_query(parse_qs(search.lstrip("?")))


def search_from_filters(filters: CaseFilter) -> str:
    """The URL query of a filtered view ('' when nothing is filtered)."""
    pairs = [(name, ",".join(_plain(v) for v in getattr(filters, name)))
             for name, _ in FILTER_FIELDS if getattr(filters, name)]
    return "?" + urlencode(pairs, safe=",") if pairs else ""


def _plain(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def filters_from_controls(values: Sequence[Sequence[Any] | None]) -> CaseFilter:
    """Filters from the page's dropdowns, in FILTER_FIELDS order."""
    return filters_from_query({name: [str(v) for v in (value or [])]
                               for (name, _), value in zip(FILTER_FIELDS, values, strict=True)})


# --- links: built from our own ids, never from a report's strings ------------------------


def report_href(report_id: int) -> str:
    return f"/reports/{int(report_id)}"


def case_href(report_id: int, case_id: str) -> str:
    return f"/reports/{int(report_id)}/cases/{quote(case_id, safe='')}"


def report_json_href(report_id: int) -> str:
    return f"/api/v1/reports/{int(report_id)}/report.json"


# --- the reports list --------------------------------------------------------------------


def report_list(session: Session, q: str | None = None) -> list[dict[str, Any]]:
    rows, _ = reports_repo.list_reports(session, limit=REPORT_LIST_LIMIT, offset=0,
                                        q=q or None)
    return [{
        "id": row.id, "date": row.date, "gpu": row.gpu, "runId": row.run_id or "",
        "source": row.source or "",
        "caseCount": row.case_count, "bestPercentOfPeak": row.best_percent_of_peak,
        "ingestedAt": row.created_at.strftime("%Y-%m-%d %H:%M UTC"),
    } for row in rows]


def load_commands(base_url: str) -> list[str]:
    """How to load data, shown on an empty reports page."""
    return [
        "moescope ingest report.json",
        "moescope ingest --url " + base_url + " --token $MOESCOPE_TOKEN report.json",
        # Double quotes: the shell must expand $MOESCOPE_TOKEN (single quotes sent it as is).
        "curl -X POST " + base_url + '/api/v1/reports -H "Authorization: Bearer $MOESCOPE_TOKEN"'
        " -H 'Content-Type: application/json' --data-binary @report.json",
    ]


# --- one report --------------------------------------------------------------------------


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


def report_header(session: Session, report_id: int) -> ReportHeader:
    return _header(reports_repo.get_report(session, report_id))


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


def report_meta(session: Session, report_id: int) -> dict[str, Any]:
    return dict(reports_repo.get_report(session, report_id).meta)


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
    cases = [case_dict(d.payload, d.derived, d.caveats)
             for d in cases_repo.case_documents(session, report_id)]
    loaded = ReportData(header=_header(row), meta=dict(row.meta), cases=cases,
                        rows=table_rows(cases),
                        facets=cases_repo.facets(session, report_id))
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


def facets(session: Session, report_id: int) -> dict[str, list[Any]]:
    return cases_repo.facets(session, report_id)


def view_cases(session: Session, report_id: int, filters: CaseFilter) -> list[Case]:
    """The cases in view, each as the API's case_out gives it."""
    return [case_dict(d.payload, d.derived, d.caveats)
            for d in cases_repo.case_documents(session, report_id, filters)]


def caveat_counts(cases: Sequence[Case]) -> dict[str, int]:
    """How many of these cases carry each caveat code (each case counted once a code)."""
    counts: Counter[str] = Counter()
    for case in cases:
        counts.update({c["code"] for c in case.get("caveats", [])})
    return dict(sorted(counts.items()))


# Plotly draws every point of a per-case chart as an SVG element; past a few hundred cases
# the browser spends seconds drawing what nobody can read. bench/dashboard.py, 2 cores: the
# 5,000-case page drew in 44 s uncapped and in 3.9 s with 400 (the 63-case page: 2.6 s).
CHART_CASE_CAP = 400


def _ranking(case: Case) -> tuple[bool, float, str]:
    useful = case.get("usefulTFPerGPU")
    return useful is None, -(useful or 0.0), str(case["id"])


def chart_cases(cases: Sequence[Case], cap: int | None = None) -> list[Case]:
    """The cases every per-case chart draws: all of them up to ``cap`` (CHART_CASE_CAP by
    default); past it, the ``cap`` cases with the highest useful TFLOP/s per GPU
    (unmeasured last, ties by case id), kept in view order. One subset for every chart,
    so a case is on all of them or on none."""
    cap = CHART_CASE_CAP if cap is None else cap
    if len(cases) <= cap:
        return list(cases)
    kept = {id(c) for c in heapq.nsmallest(cap, cases, key=_ranking)}
    return [c for c in cases if id(c) in kept]


def cap_banner(charted: int, in_view: int) -> str:
    """The notice above the charts when the cap applies ('' when every case is charted)."""
    if charted >= in_view:
        return ""
    return (f"Charts show the {charted} cases with the highest useful TFLOP/s of {in_view} "
            "in view; narrow the filters to chart the rest. Caveat counts, the table and the "
            f"CSV cover all {in_view}.")


@dataclass
class ChartPanel:
    key: str
    title: str
    figure: figures.Spec  # plain plotly data: dcc.Graph takes it as is
    notes: list[ReportNote]
    caveats: dict[str, int]  # over every case in view, charted or not
    case_count: int  # cases in view
    charted: int  # cases the chart draws (at most CHART_CASE_CAP)


def chart_panels(meta: Mapping[str, Any], cases: Sequence[Case],
                 charted: Sequence[Case] | None = None) -> list[ChartPanel]:
    """The nine charts of the view, each drawing ``charted`` (by default
    ``chart_cases(cases)``), with the notes that qualify it and the caveat counts of all
    the cases in view."""
    drawn = chart_cases(cases) if charted is None else list(charted)
    notes = {n.key: n for n in report_notes(meta)}
    several_eps = len({c["ep"] for c in drawn}) > 1
    counts = caveat_counts(cases)
    panels = []
    for chart in figures.CHARTS:
        keys = list(chart.notes) + (["placementNote"] if several_eps else [])
        panels.append(ChartPanel(
            key=chart.key, title=chart.title, figure=chart.make(drawn, dict(meta),
                                                       legend=False),
            notes=[notes[k] for k in keys if k in notes], caveats=counts,
            case_count=len(cases), charted=len(drawn),
        ))
    return panels


@dataclass
class ReportView:
    """Everything the report page draws for one set of filters."""

    header: ReportHeader
    meta: dict[str, Any]
    filters: CaseFilter
    cases: list[Case]  # every case in view
    charted: list[Case]  # the ones the charts draw
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


def report_view(session: Session, report_id: int, filters: CaseFilter) -> ReportView:
    report = report_data(session, report_id)
    picked = filters.passing(report.cases)
    cases = [report.cases[i] for i in picked]
    charted = chart_cases(cases)
    return ReportView(header=report.header, meta=report.meta, filters=filters, cases=cases,
                      charted=charted, panels=chart_panels(report.meta, cases, charted),
                      rows=[report.rows[i] for i in picked], facets=report.facets)


TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "case"), ("mode", "mode"), ("ep", "EP"), ("precision", "precision"),
    ("pipeline", "pipeline"), ("category", "category"), ("F", "F"),
    ("imbalance", "imbalance"), ("layerMS", "layer ms"), ("forwardMS", "forward ms"),
    ("backwardMS", "backward ms"), ("usefulTFPerGPU", "useful TFLOP/s"),
    ("percentOfPeak", "% of peak"), ("hbmPercentOfPeak", "HBM % of peak"),
    ("nvlinkTXPercentOfPeak", "NVLink TX %"), ("nvlinkRXPercentOfPeak", "NVLink RX %"),
    ("windowSpreadPercent", "window spread %"), ("observedImbalance", "observed imbalance"),
    ("allocatedPeakGiB", "allocated GiB"), ("reservedPeakGiB", "reserved GiB"),
    ("caveats", "caveats"),
)


# The grid shows 4 significant digits; 6 keep its sorting and filtering exact enough and
# make a 5,000-row update a third smaller. The CSV takes the exact values (csv_rows).
GRID_DIGITS = 6


def table_row(case: Case, digits: int | None = None) -> dict[str, Any]:
    """A case's table row, floats rounded to ``digits`` significant digits (or exact); no
    empty field (the grid and the CSV read a missing one as empty) and no link: the id
    cell builds it (see static/)."""
    row = {name: _rounded(value, digits) for name, _ in TABLE_COLUMNS
           if (value := case.get(name)) is not None}
    row["caveats"] = " ".join(c["code"] for c in case.get("caveats", []))
    return row


def _rounded(value: Any, digits: int | None) -> Any:
    if digits is None or not isinstance(value, float):
        return value
    return float(f"{value:.{digits}g}")


def table_rows(cases: Sequence[Case]) -> list[dict[str, Any]]:
    """The case table as the grid gets it: a 5,000-case view sends every row on each
    filter change, so rows are small."""
    return [table_row(case, GRID_DIGITS) for case in cases]


def csv_rows(session: Session, report_id: int,
             shown: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The exact rows of the cases the grid shows, in its order (its numbers are rounded)."""
    by_id = {c["id"]: c for c in report_data(session, report_id).cases}
    return [table_row(by_id[row["id"]]) for row in shown if row.get("id") in by_id]


def _csv_cell(value: Any) -> Any:
    # A spreadsheet runs a cell starting with = + - @ as a formula: report strings must not.
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def csv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([name for name, _ in TABLE_COLUMNS])
    for row in rows:
        writer.writerow([_csv_cell(row.get(name)) for name, _ in TABLE_COLUMNS])
    return out.getvalue()


# --- one case ----------------------------------------------------------------------------


def case_view(session: Session, report_id: int, case_id: str) -> Case:
    return case_out(cases_repo.get_case(session, report_id, case_id))


def display_value(value: Any) -> str:
    """A field's value as text, in JSON's spelling (null, true) as the wire has it."""
    if isinstance(value, float):
        return f"{value:,.6g}"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def case_fields(case: Case) -> list[tuple[str, str]]:
    """Every wire and derived field (known or not), as displayable text, caveats apart."""
    return [(key, display_value(value)) for key, value in case.items() if key != "caveats"]


# --- comparing two reports ---------------------------------------------------------------

COMPARED: tuple[tuple[str, str, bool], ...] = (
    # field, label, higher is better
    ("layerMS", "layer time ms", False),
    ("usefulTFPerGPU", "useful TFLOP/s", True),
    ("percentOfPeak", "% of peak", True),
    ("allocatedPeakGiB", "allocated peak GiB", False),
)


@dataclass
class Change:
    base: float | None
    head: float | None
    percent: float | None
    verdict: str  # "regression", "improvement", "" (within the threshold or not comparable)


@dataclass
class Comparison:
    rows: list[dict[str, Any]] = field(default_factory=list)
    only_base: list[str] = field(default_factory=list)
    only_head: list[str] = field(default_factory=list)


def change(base: float | None, head: float | None, higher_is_better: bool) -> Change:
    if base is None or head is None or base == 0:
        return Change(base, head, None, "")
    percent = (head - base) / abs(base) * 100.0
    verdict = ""
    if abs(percent) > CHANGE_THRESHOLD_PERCENT:
        better = percent > 0 if higher_is_better else percent < 0
        verdict = "improvement" if better else "regression"
    return Change(base, head, percent, verdict)


def compare(base: Sequence[Case], head: Sequence[Case]) -> Comparison:
    """Cases matched by id; per case the change of each compared field."""
    head_by_id = {c["id"]: c for c in head}
    base_ids = {c["id"] for c in base}
    result = Comparison(
        only_base=[c["id"] for c in base if c["id"] not in head_by_id],
        only_head=[c["id"] for c in head if c["id"] not in base_ids],
    )
    for case in base:
        other = head_by_id.get(case["id"])
        if other is None:
            continue
        changes = {name: change(case.get(name), other.get(name), better)
                   for name, _, better in COMPARED}
        result.rows.append({"id": case["id"], "changes": changes})
    return result


def report_cases(session: Session, report_id: int) -> list[Case]:
    return view_cases(session, report_id, CaseFilter())


def report_options(session: Session) -> list[dict[str, Any]]:
    """Picker options for the compare page: newest first."""
    return [{"label": f"#{r['id']} {r['date']} {r['gpu']}"
                      + (f" · {r['runId']}" if r["runId"] else "") + f" ({r['caseCount']} cases)",
             "value": r["id"]} for r in report_list(session)]
