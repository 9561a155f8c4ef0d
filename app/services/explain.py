"""Why the flagged cases of a report moved, against their history: each flagged case's
phases against the median phases of its baseline (the same last ``window`` earlier reports
of its series the verdict's median is taken over), its GPU state against the baseline's,
and the flagged cases grouped by the dimensions they share. What the regressions endpoint
and ``moescope regressions`` add to the verdicts."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.case_view import CaseView
from app.repository import pairs as pairs_repo
from app.services.history import ReportVerdicts, history_path, report_regressions
from ingest.attribution import Attribution, Measured, attribute, median_phases
from ingest.grouping import Flagged, Group, group_flagged
from ingest.regressions import Verdict


@dataclass(frozen=True)
class Explanation:
    attributions: dict[str, Attribution]  # flagged case id -> why
    groups: list[Group]
    previous_report_id: int | None  # the series' report before this one: compare's base


def baseline_gpu_state(cases: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The median clocks and power of the earlier measurements, and the throttle reasons
    at least half of them saw (one throttled run in the baseline does not hide a new one)."""
    states = [c["gpuState"] for c in cases if c.get("gpuState")]
    if not states:
        return None
    names: dict[str, int] = {}
    for state in states:
        for name in state.get("throttleReasonNames") or []:
            names[name] = names.get(name, 0) + 1
    return {
        **{key: statistics.median(s[key] for s in states)
           for key in ("smClockMinMHz", "smClockMaxMHz", "powerMaxW")},
        "throttleReasonNames": [n for n, seen in names.items() if seen * 2 >= len(states)],
    }


def baseline_case(earlier: Sequence[Mapping[str, Any]]) -> Measured:
    """``earlier``: the case as posted in each report of its baseline (the repository's)."""
    return Measured(median_phases(earlier), baseline_gpu_state(earlier))


def _attribute(session: Session, report_id: int, case_ids: Sequence[str], window: int,
               cases: Mapping[str, Measured] | None = None
               ) -> dict[str, Attribution]:
    """Why each of these cases of the report (``cases``: what was measured of them, when
    the caller has it) moved against the same case in the ``window`` reports before it."""
    earlier = pairs_repo.earlier_payloads(session, report_id, case_ids, window)
    newest = cases if cases is not None else {
        case_id: Measured.of(payload)
        for case_id, payload in pairs_repo.case_payloads(session, report_id, case_ids).items()}
    return {case_id: attribute(baseline_case(earlier.get(case_id, [])), newest[case_id])
            for case_id in case_ids if case_id in newest}


def attribute_cases(session: Session, report_id: int, case_ids: Sequence[str],
                    window: int) -> dict[str, Attribution]:
    """Why each of these cases of the report moved against its baseline (an alert's)."""
    return _attribute(session, report_id, case_ids, window)


def attributions(session: Session, result: ReportVerdicts) -> dict[str, Attribution]:
    """Why each flagged case of the report moved, against its baseline."""
    return _attribute(session, result.report_id, [item.case_id for item in result.flagged],
                      result.settings.window)


# A history page attributes at most this many of its flagged points (the newest): each
# reads its baseline's reports, and a noisy series can flag dozens.
MAX_ATTRIBUTED_POINTS = 12


def history_attributions(session: Session, case_id: str, report_ids: Sequence[int],
                         window: int) -> dict[int, Attribution]:
    """Why one case moved at each of these reports of its series (a history's flagged
    points; the newest MAX_ATTRIBUTED_POINTS of them), in the words the regressions
    endpoint, compare and the CLI use for the same report."""
    found = {}
    for report_id in list(report_ids)[-MAX_ATTRIBUTED_POINTS:]:
        why = _attribute(session, report_id, [case_id], window).get(case_id)
        if why is not None:
            found[report_id] = why
    return found


def explain(session: Session, result: ReportVerdicts) -> Explanation:
    flagged = result.flagged
    cases = {c["id"]: c for c in pairs_repo.case_dimensions(session, result.report_id)} \
        if flagged else {}
    groups = group_flagged(
        [Flagged(cases[i.case_id], i.verdict.status, i.verdict.change_percent or 0.0)
         for i in flagged], list(cases.values()))
    return Explanation(attributions(session, result), groups,
                       pairs_repo.previous_report(session, result.report_id))


@dataclass(frozen=True)
class CaseAgainstHistory:
    """One case of a report judged as the report page and the regressions endpoint judge
    it, with the link to its history and, when it moved, why."""

    verdict: Verdict
    history_href: str
    attribution: Attribution | None


def case_against_history(session: Session, report_id: int, case: CaseView
                         ) -> CaseAgainstHistory | None:
    """None when the report does not hold the case."""
    result = report_regressions(session, report_id)
    item = next((i for i in result.items if i.case_id == case.id), None)
    if item is None:
        return None
    attribution = None
    if item.verdict.flagged:
        attribution = _attribute(session, report_id, [item.case_id], result.settings.window,
                                 {item.case_id: case.measured})[item.case_id]
    return CaseAgainstHistory(item.verdict, history_path(item.case_id, result.gpu,
                                                         result.series), attribution)
