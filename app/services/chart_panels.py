"""The report page's charts: which cases they draw (at most CHART_CASE_CAP), each chart
beside the report notes that qualify it and the caveat counts of the cases in view."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app import figures
from app.case_view import CaseView
from app.figures.point_key import point_key
from ingest.derived import ReportNote, report_notes
from ingest.words import counted

# Plotly draws every point of a per-case chart as an SVG element; past a few hundred cases
# the browser spends seconds drawing what nobody can read. bench/dashboard.py, 2 cores: the
# 5,000-case page drew in 44 s uncapped and in 3.9 s with 400 (the 63-case page: 2.6 s).
CHART_CASE_CAP = 400


def _ranking(case: CaseView) -> tuple[bool, float, str]:
    useful = case.usefulTFPerGPU
    return useful is None, -(useful or 0.0), case.id


def chart_cases(cases: Sequence[CaseView], cap: int | None = None) -> list[CaseView]:
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
    absent: str = ""  # why the view has nothing for this chart ('' when it has)
    # (number, case id) of its numbered points, for a keyed chart (figures.point_key)
    point_key: tuple[tuple[int, str], ...] = ()

    @property
    def drawn(self) -> str:
        """How many cases it draws, as the page and the export say it."""
        if self.charted == self.case_count:
            return f"{counted(self.case_count, 'case')} in view"
        return f"{self.charted} of {self.case_count} cases in view charted"


def chart_panels(meta: Mapping[str, Any], cases: Sequence[CaseView], caveats: dict[str, int],
                 charted: Sequence[CaseView] | None = None) -> list[ChartPanel]:
    """Every chart of ``figures.CHARTS`` for the view, each drawing ``charted`` (by default
    ``chart_cases(cases)``), with the notes that qualify it and ``caveats``, the caveat
    counts of all the cases in view (as the repository's ``caveat_counts`` gives them)."""
    drawn = chart_cases(cases) if charted is None else list(charted)
    notes = {n.key: n for n in report_notes(meta)}
    several_eps = len({c.ep for c in drawn}) > 1
    panels = []
    for chart in figures.CHARTS:
        keys = list(chart.notes) + (["placementNote"] if several_eps else [])
        panels.append(ChartPanel(
            key=chart.key, title=chart.title, figure=chart.make(drawn, dict(meta),
                                                       legend=False),
            notes=[notes[k] for k in keys if k in notes], caveats=caveats,
            case_count=len(cases), charted=len(drawn), absent=chart.absent(drawn),
            point_key=point_key(drawn) if chart.keyed else (),
        ))
    return panels
