"""The report screen's read model: everything the report page and the report's HTML export
show for one report, one set of filters and the page's choices (the matrix's metric), built
by one call. The page and the export render it; neither assembles a part of its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from sqlalchemy.orm import Session

from app.case_fields import CaseFilter
from app.matrix_metrics import DEFAULT_METRIC, METRICS
from app.models import ReportRow
from app.repository import cases as cases_repo
from app.repository import pairs as pairs_repo
from app.repository import reports as reports_repo
from app.services import filter_choices
from app.services.against_history import (
    AgainstHistory,
    ReportMarks,
    against_history,
    report_marks,
)
from app.services.alert_list import Alert, alerts_of
from app.services.filter_choices import FilterOption
from app.services.host_facts import host_facts
from app.services.matrix import Matrix, build_matrix
from app.services.report_view import ReportCache, ReportView, report_view
from app.services.summary import SummaryRow, summary_rows
from ingest.bounds import bound_sentence, bound_short
from ingest.derived import ReportNote, report_notes


@dataclass(frozen=True)
class ReportChoices:
    """What the page's URL or controls chose besides the filters."""

    matrix_metric: str | None = None  # None: the default metric
    url_query: Mapping[str, Any] = field(default_factory=dict)  # raw, for its problems


@dataclass(frozen=True)
class ReportFacts:
    """What the page says of the report itself, whatever its filters."""

    host: tuple[tuple[str, str], ...]  # meta.host as (label, value)
    previous: int | None  # the report before it in its series
    other_gpus: tuple[tuple[str, int], ...]  # (GPU, newest report of it): "compare with…"
    alerts: tuple[Alert, ...]  # opened by this report or first bad at it, newest first


# A filter change redraws none of the facts (the page keeps those it showed): its callback
# passes these instead of reading them again.
FACTS_KEPT = ReportFacts(host=(), previous=None, other_gpus=(), alerts=())


def other_gpus(session: Session, report_id: int) -> list[tuple[str, int]]:
    """(GPU, report id) of the newest report of each GPU other than this report's: what
    its "compare with…" links open."""
    (gpu,) = reports_repo.report_columns(session, report_id, ReportRow.gpu)
    return [(g, i) for i, g in reports_repo.newest_per_gpu(session, 50) if g != gpu]


def report_facts(session: Session, report_id: int, meta: Mapping[str, Any]) -> ReportFacts:
    return ReportFacts(host=host_facts(meta),
                       previous=pairs_repo.previous_report(session, report_id),
                       other_gpus=tuple(other_gpus(session, report_id)),
                       alerts=tuple(alerts_of(session, report_ids=[report_id])))


@dataclass(frozen=True)
class ReportPage:
    view: ReportView
    marks: ReportMarks
    history: AgainstHistory
    facts: ReportFacts
    options: Mapping[str, list[FilterOption]]  # each filter's options with their counts
    hint: str  # '' unless no case passes the filters: then which filter to relax
    problems: tuple[str, ...]  # values of the URL that filter nothing, named
    matrix: Matrix  # for the chosen metric
    summary: tuple[SummaryRow, ...]
    notes: tuple[ReportNote, ...]

    @property
    def report_id(self) -> int:
        return self.view.header.id

    @property
    def metric(self) -> str:
        return self.matrix.metric.key

    def matrices(self) -> list[Matrix]:
        """The matrix for every metric (the export holds them all: no server to ask)."""
        return [self.matrix if m == self.metric else build_matrix(self.view.cases, m)
                for m in METRICS]

    @cached_property
    def bounds(self) -> dict[str, tuple[str, str]]:
        """Case id -> what bounds it, in words (ingest.bounds): the sentence and its short
        form for a table cell, for the cases in view."""
        out = {}
        for c in self.view.cases:
            out[c.id] = (bound_sentence(c.bound), bound_short(c.bound))
        return out


def metric_choice(raw: Any) -> tuple[str, str]:
    """The matrix metric a URL's ``?matrixMetric=`` picks (the export link sends it), and a
    message naming the metrics when it picks none of them ('' when fine)."""
    value = raw[-1] if isinstance(raw, list) and raw else raw
    if value in (None, ""):
        return DEFAULT_METRIC, ""
    if value in METRICS:
        return str(value), ""
    return DEFAULT_METRIC, (f"matrixMetric={value!r} is not one of {', '.join(METRICS)}; "
                            f"the matrix shows {DEFAULT_METRIC}")


def report_page(reports: ReportCache, session: Session, report_id: int,
                filters: CaseFilter, choices: ReportChoices | None = None,
                marks: ReportMarks | None = None,
                facts: ReportFacts | None = None) -> ReportPage:
    """``marks``: the report's marks against history when the caller holds them (the
    page's store, on a filter change): no history query then; ``facts`` likewise
    (FACTS_KEPT on a filter change)."""
    choices = choices or ReportChoices()
    data = reports.report(session, report_id)  # NotFound for a report that does not exist
    problems = filter_choices.url_problems(choices.url_query, data.facets)
    chosen = filter_choices.known_filters(filters, data.facets)
    metric, metric_problem = metric_choice(choices.matrix_metric)
    marks = marks if marks is not None else report_marks(session, report_id)
    view = report_view(reports, session, report_id, chosen, marks.hover())
    counts = cases_repo.option_counts(session, report_id, chosen)
    return ReportPage(
        view=view, marks=marks, history=against_history(marks, view.cases),
        facts=facts if facts is not None else report_facts(session, report_id, view.meta),
        options=filter_choices.all_options(data.facets, counts, chosen),
        hint=filter_choices.empty_hint(counts, chosen) if data.cases else "",
        problems=(*problems, *([metric_problem] if metric_problem else [])),
        matrix=build_matrix(view.cases, metric), summary=tuple(summary_rows(view.cases)),
        notes=tuple(report_notes(view.meta)))

