"""A report's cases against their history, as its page and its export show them (built
once here for both): a mark per case (the case table's column, the charts' hover), and the
moved cases in view, grouped by the dimensions they share, each with why it moved."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.case_view import CaseView
from app.services.explain import attributions
from app.services.history import history_path, report_regressions
from ingest.grouping import Flagged, group_flagged
from ingest.regressions import MAD_TO_SIGMA, Settings

MOVED = ("regression", "improvement")
ARROWS = {"regression": "\u25b2", "improvement": "\u25bc"}


@dataclass(frozen=True)
class CaseMark:
    """One case's verdict against its history. A moved one carries its baseline, noise and
    why (the phase or GPU state that explains it, '' when none does)."""

    status: str
    href: str  # its history page
    change: float | None = None  # percent, layer time
    baseline: float | None = None  # ms, the median of the earlier reports
    baseline_points: int | None = None
    noise: float | None = None  # percent
    why: str = ""

    @property
    def moved(self) -> bool:
        return self.status in MOVED

    def row(self) -> dict[str, Any]:
        """The fields the case table's "vs history" cell reads (static/'s HistoryTrend)."""
        row: dict[str, Any] = {"historyStatus": self.status, "historyHref": self.href}
        if self.change is not None:
            row["historyChange"] = round(self.change, 2)
        return row


@dataclass(frozen=True)
class ReportMarks:
    """Every case of the report against its history, and the settings that judged them."""

    marks: Mapping[str, CaseMark]
    judged: int  # cases with enough history to be judged
    settings: Settings

    def store(self) -> dict[str, Any]:
        """As the page keeps it in the browser, so a filter change needs no history query."""
        return {"judged": self.judged, "settings": asdict(self.settings),
                "marks": {case_id: asdict(m) for case_id, m in self.marks.items()}}

    @classmethod
    def from_store(cls, data: Mapping[str, Any] | None) -> ReportMarks:
        data = data or {}
        return cls({case_id: CaseMark(**m) for case_id, m in data.get("marks", {}).items()},
                   int(data.get("judged", 0)), Settings(**data.get("settings", {})))

    def hover(self) -> dict[str, str]:
        """The charts' hover note of each moved case."""
        return {case_id: f"{ARROWS[m.status]} {m.change or 0.0:+.1f} % vs history"
                for case_id, m in self.marks.items() if m.moved}


def report_marks(session: Session, report_id: int) -> ReportMarks:
    result = report_regressions(session, report_id)
    why = {case_id: a.text() for case_id, a in attributions(session, result).items()}
    marks = {}
    for item in result.items:
        v = item.verdict
        moved = v.flagged
        marks[item.case_id] = CaseMark(
            status=v.status, href=history_path(item.case_id, result.gpu, result.series),
            change=v.change_percent, baseline=v.baseline if moved else None,
            baseline_points=v.baseline_points if moved else None,
            noise=v.noise_percent if moved else None, why=why.get(item.case_id, ""))
    judged = sum(1 for i in result.items if i.verdict.status != "insufficient_history")
    return ReportMarks(marks, judged, result.settings)


@dataclass(frozen=True)
class AgainstHistory:
    """The report's moved cases for one view: what the page's "Against history" section
    and the export's show."""

    summary: str  # how many of the report's cases moved, and how they were judged
    noise: str  # what counts as noise
    in_view: str  # '' when every moved case is in view
    everywhere: int  # moved cases of the whole report
    judged_in_view: int
    flagged: tuple[tuple[str, CaseMark], ...]  # (case id, mark) of the moved cases in view
    groups: tuple[str, ...]  # those grouped by the dimensions they share


def against_history(marks: ReportMarks, cases: Sequence[CaseView]) -> AgainstHistory:
    """``cases``: the cases in view (what ``ingest.grouping`` groups)."""
    s = marks.settings
    everywhere = sum(1 for m in marks.marks.values() if m.moved)
    if not marks.judged:
        summary = (f"No case has {s.min_points} earlier reports in its series yet "
                   "(same GPU and shape): nothing is judged against history.")
    else:
        summary = (f"{everywhere} of {marks.judged} cases judged moved past "
                   f"{s.threshold_percent:g} % and past their noise, against the "
                   f"median of up to {s.window} earlier reports.")
    noise = (f"Noise: the larger of {s.z:.1f} × {MAD_TO_SIGMA} × MAD of those reports, the "
             "case's own window spread and their median window spread.")
    in_view = [(case, marks.marks.get(case.id)) for case in cases]
    moved = [(case, case.id, m) for case, m in in_view if m is not None and m.moved]
    groups = group_flagged(
        [Flagged(c.dimensions(), m.status, m.change or 0.0) for c, _, m in moved],
        [c.dimensions() for c in cases])
    judged_in_view = sum(1 for _, m in in_view
                         if m is not None and m.status != "insufficient_history")
    return AgainstHistory(
        summary, noise, "" if len(moved) == everywhere
        else f"{len(moved)} of the {everywhere} moved cases are in view.",
        everywhere, judged_in_view, tuple((case_id, m) for _, case_id, m in moved),
        tuple(g.text() for g in groups))
