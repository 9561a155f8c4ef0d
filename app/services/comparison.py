"""Two reports side by side: cases matched by id, each judged by ``ingest.regressions.judge``.

The verdict (the history page's words: regression, improvement, unchanged,
insufficient_history) has one of two bases:

- ``history``: base and head are of one series (``ingest.series``) and base comes first.
  The case's verdict is the one history gives the head report: its layer time against the
  median of its series' earlier points, past the threshold and past the series' noise.
  Compare and history then say the same thing of the same case.
- ``pair``: the reports are of different series, base is not earlier, or the series has
  fewer than ``min_points`` earlier points of the case. ``judge`` is asked with the base as
  the only earlier point (``min_points`` 1): the change is head against base, and the noise
  is the larger of the two reports' window spreads (one point has no run-to-run spread).

Every metric family is shown beside it as base -> head, and the phases and the GPU state
say why (``ingest.attribution``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sqlalchemy.orm import Session

from app.case_view import CaseView
from app.core.errors import NotFound
from app.figures.compare_charts import RatioPoint
from app.figures.configuration import configuration_fields, variant
from app.metrics import COMPARE
from app.models import ReportRow
from app.repository import history as history_repo
from app.repository import pairs as pairs_repo
from app.repository import reports as reports_repo
from app.services import cases as case_service
from app.services.history import report_regressions
from app.services.platforms import cross_headline, platform_of
from ingest.attribution import Attribution, attribute
from ingest.grouping import Flagged, Group, group_flagged
from ingest.regressions import Point, Settings, Verdict, judge
from ingest.words import counted

Basis = Literal["history", "pair"]


METRICS = COMPARE
FAMILIES = tuple(dict.fromkeys(m.family for m in METRICS))


@dataclass(frozen=True)
class Change:
    base: float | None
    head: float | None

    @property
    def percent(self) -> float | None:
        if self.base is None or self.head is None or self.base == 0:
            return None
        return (self.head - self.base) / abs(self.base) * 100.0


@dataclass(frozen=True)
class CaseComparison:
    case_id: str
    base: CaseView
    head: CaseView
    changes: dict[str, Change]  # by Metric.key
    verdict: Verdict
    basis: Basis
    attribution: Attribution

    @property
    def ratio(self) -> float:
        """Head layer time over base layer time (> 1: head is slower)."""
        return self.head.layerMS / self.base.layerMS

    @property
    def throttle(self) -> tuple[str, str]:
        def names(case: CaseView) -> str:
            state = case.gpuState
            if not state:
                return "n/a"
            return ", ".join(state.get("throttleReasonNames") or []) or "none"
        return names(self.base), names(self.head)


@dataclass(frozen=True)
class ProvenanceChange:
    field: str
    base: str
    head: str


@dataclass(frozen=True)
class GeoMean:
    mode: str
    precision: str
    pipeline: str
    cases: int
    change_percent: float  # layer time, geometric mean of head/base, as a change


@dataclass(frozen=True)
class Comparison:
    base_id: int
    head_id: int
    same_series: bool
    settings: Settings
    rows: list[CaseComparison] = field(default_factory=list)
    only_base: list[str] = field(default_factory=list)
    only_head: list[str] = field(default_factory=list)
    provenance: list[ProvenanceChange] = field(default_factory=list)
    geomeans: list[GeoMean] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    # Base and head of different GPUs or shapes: cases matched by configuration, and the
    # line that says so at the top ("GB300 vs H200: peaks differ, matched by ...").
    headline: str | None = None

    def count(self, status: str) -> int:
        return sum(1 for r in self.rows if r.verdict.status == status)

    def summary_text(self) -> str:
        bases = {r.basis for r in self.rows}
        how = ("each case against its series' history (as the history page judges it)"
               if bases == {"history"} else
               "each case against the base alone (threshold and the two runs' window spread)"
               if bases == {"pair"} else
               "against its series' history where it has "
               f"{self.settings.min_points} earlier points, else against the base alone")
        return (f"{counted(len(self.rows), 'matched case')}: "
                f"{counted(self.count('regression'), 'regression')}, "
                f"{counted(self.count('improvement'), 'improvement')}, {self.count('unchanged')} "
                f"unchanged, {self.count('insufficient_history')} with too little history; "
                f"judged {how}, past {self.settings.threshold_percent:g} % and past the "
                "noise.")


STATUS_ORDER = {"regression": 0, "improvement": 1, "unchanged": 2, "insufficient_history": 3}


def ranked(rows: Sequence[CaseComparison]) -> list[CaseComparison]:
    """Regressions first (largest first), then improvements (largest first), then the rest
    in report order."""
    def key(row: CaseComparison) -> tuple[int, float]:
        change = row.verdict.change_percent or 0.0
        return STATUS_ORDER[row.verdict.status], -abs(change) if row.verdict.flagged else 0.0
    return sorted(rows, key=key)


def pair_verdict(base: CaseView, head: CaseView, settings: Settings) -> Verdict:
    """``judge`` with the base as the only earlier point."""
    return judge([Point(base.layerMS, base.windowSpreadPercent)],
                 Point(head.layerMS, head.windowSpreadPercent),
                 replace(settings, min_points=1))


def _flatten(value: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}{key}."))
        return out
    text = value if isinstance(value, str) else json.dumps(value)
    return {prefix.rstrip("."): text}


def _provenance_rank(name: str) -> tuple[int, str]:
    # What a person suspects first: the host and software, then where the numbers came
    # from, then the notes that qualify them, then the rest.
    if name.startswith("host."):
        return 0, name
    if name in ("source", "gpu"):
        return 1, name
    if name.endswith("Note"):
        return 2, name
    return 3, name


def provenance_diff(base_meta: Mapping[str, Any],
                    head_meta: Mapping[str, Any]) -> list[ProvenanceChange]:
    """Every meta field (nested ones by dotted name) whose value differs, host first."""
    base, head = _flatten(base_meta), _flatten(head_meta)
    names = sorted(set(base) | set(head), key=_provenance_rank)
    return [ProvenanceChange(n, base.get(n, "(absent)"), head.get(n, "(absent)"))
            for n in names if base.get(n) != head.get(n)]


def geometric_means(rows: Sequence[CaseComparison]) -> list[GeoMean]:
    """The layer time's geometric-mean change per mode x precision x pipeline."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for row in rows:
        key = (row.head.mode, row.head.precision, row.head.pipeline)
        groups.setdefault(key, []).append(math.log(row.ratio))
    return [GeoMean(*key, cases=len(logs),
                    change_percent=(math.exp(sum(logs) / len(logs)) - 1) * 100)
            for key, logs in groups.items()]


def by_id(case: CaseView) -> Hashable:
    return case.id


def by_configuration(case: CaseView) -> Hashable:
    """Across GPUs and shapes (DESIGN.md "Across hardware"): case ids may differ."""
    return (configuration_fields(case), variant(case))


def compare(base: Sequence[CaseView], head: Sequence[CaseView], settings: Settings | None = None,
            history: Mapping[str, Verdict] | None = None,
            key: Callable[[CaseView], Hashable] = by_id) -> tuple[
                list[CaseComparison], list[str], list[str]]:
    """Cases matched by ``key``, id by default (head's order): (matched, only in base, only
    in head). ``history``: the head report's verdicts against its series, where base
    precedes it."""
    settings = settings or Settings()
    history = history or {}
    base_by_id = {key(c): c for c in base}
    head_ids = {key(c) for c in head}
    rows = []
    for case in head:
        other = base_by_id.get(key(case))
        if other is None:
            continue
        found = history.get(case.id)
        basis: Basis = "history"
        if found is None or found.status == "insufficient_history":
            found, basis = pair_verdict(other, case, settings), "pair"
        rows.append(CaseComparison(
            case_id=case.id, base=other, head=case,
            changes={m.key: Change(other.number(m.key), case.number(m.key))
                     for m in METRICS},
            verdict=found, basis=basis, attribution=attribute(other.measured, case.measured)))
    return (rows, [c.id for c in base if key(c) not in head_ids],
            [c.id for c in head if key(c) not in base_by_id])


def history_verdicts(session: Session, base_id: int, head_id: int,
                     settings: Settings) -> dict[str, Verdict] | None:
    """The head's verdicts against its series when base is an earlier report of it."""
    base = history_repo.report_position(session, base_id)
    head = history_repo.report_position(session, head_id)
    if base.series != head.series or (base.date, base.created_at, base.report_id) >= (
            head.date, head.created_at, head.report_id):
        return None
    result = report_regressions(session, head_id, settings)
    return {item.case_id: item.verdict for item in result.items}


def compare_reports(session: Session, base_id: int, head_id: int,
                    settings: Settings | None = None) -> Comparison:
    settings = settings or Settings()
    base_row = reports_repo.get_report(session, base_id)
    head_row = reports_repo.get_report(session, head_id)
    base_meta, head_meta = base_row.meta, head_row.meta
    history = history_verdicts(session, base_id, head_id, settings)
    base_platform = platform_of(base_id, base_row.gpu, base_row.date, base_meta)
    head_platform = platform_of(head_id, head_row.gpu, head_row.date, head_meta)
    cross = (base_platform.gpu, base_platform.shape) != (head_platform.gpu, head_platform.shape)
    base_cases = case_service.case_views(session, base_id)
    head_cases = case_service.case_views(session, head_id)
    rows, only_base, only_head = compare(base_cases, head_cases, settings, history,
                                         by_configuration if cross else by_id)
    headline = cross_headline(
        [base_platform.gpu, head_platform.gpu], base_platform.peaks != head_platform.peaks,
        base_platform.shape != head_platform.shape, len(rows),
        len({by_configuration(c) for c in [*base_cases, *head_cases]})) if cross else None
    flagged = [Flagged(r.head.dimensions(), r.verdict.status, r.verdict.change_percent or 0.0)
               for r in rows if r.verdict.flagged]
    return Comparison(
        base_id=base_id, head_id=head_id, same_series=history is not None, settings=settings,
        rows=ranked(rows), only_base=only_base, only_head=only_head,
        provenance=provenance_diff(base_meta, head_meta), geomeans=geometric_means(rows),
        groups=group_flagged(flagged, [r.head.dimensions() for r in rows]), headline=headline,
    )


def default_pair(session: Session) -> tuple[int, int] | None:
    """The newest report and the previous report of its series: what compare shows first."""
    try:
        head = reports_repo.latest_report_id(session)
    except NotFound:
        return None
    base = pairs_repo.previous_report(session, head)
    return None if base is None else (base, head)


def no_pair_text(session: Session) -> str:
    """Why compare opens on no pair: no report at all, or the newest has no earlier
    report in its series."""
    try:
        head = reports_repo.latest_report_id(session)
    except NotFound:
        return "The database holds no report yet: nothing to compare."
    gpu, date = reports_repo.report_columns(session, head, ReportRow.gpu, ReportRow.date)
    return (f"The newest report, #{head} ({gpu}, {date}), is the first of its series (GPU "
            "and shape): there is no earlier report to compare it with. Pick a base and a "
            "head above, or see it beside other GPUs on the platforms page.")


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def change_text(change: Change, unit: str = "") -> str:
    """A change as its cell shows it: 'base → head unit (+x.x %)', or n/a."""
    if change.base is None or change.head is None:
        return "n/a"
    values = f"{_number(change.base)} → {_number(change.head)}" + (f" {unit}" if unit else "")
    percent = change.percent
    return values if percent is None else f"{values} ({percent:+.1f} %)"


def verdict_text(row: CaseComparison) -> str:
    """'regression +18.2 % (noise 2.1 %, vs history median of 5)'."""
    v = row.verdict
    if v.change_percent is None or v.noise_percent is None:
        return f"{v.status} ({v.baseline_points} earlier point(s))"
    against = (f"vs history median of {v.baseline_points}" if row.basis == "history"
               else "vs base")
    return f"{v.status} {v.change_percent:+.1f} % (noise {v.noise_percent:.1f} %, {against})"


def ratio_points(result: Comparison) -> list[RatioPoint]:
    """What the ratio chart draws, per matched case (see figures.compare_charts)."""
    return [RatioPoint(case=r.head, id=r.case_id, ratio=r.ratio, status=r.verdict.status,
                       noise_percent=r.verdict.noise_percent, verdict=verdict_text(r))
            for r in result.rows]
