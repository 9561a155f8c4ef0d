"""A case's history as the history page draws it, and the marks the report page puts on
the cases that moved against their history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app import figures
from app.figures.style import Spec
from app.services.history import (
    ReportVerdicts,
    case_history,
    history_path,
    point_dict,
    report_regressions,
)


@dataclass(frozen=True)
class HistoryView:
    case_id: str
    gpu: str
    fields: dict[str, Any]
    points: list[dict[str, Any]]  # oldest first, as the history endpoint gives them
    specs: dict[str, Spec]
    other_series: list[tuple[str, str]]  # (label, href)

    @property
    def latest(self) -> dict[str, Any] | None:
        return self.points[-1] if self.points else None


def history_view(session: Session, case_id: str, gpu: str, series: str | None) -> HistoryView:
    history = case_history(session, case_id, gpu, series)
    points = [point_dict(p) for p in history.points]
    return HistoryView(
        case_id=case_id, gpu=gpu, fields=history.fields, points=points,
        specs=figures.history_specs(points),
        other_series=[(f"series {s}", history_path(case_id, gpu, s))
                      for s in history.other_series],
    )


def verdict_line(point: dict[str, Any]) -> str:
    """The newest point's verdict in words: what moved, by how much, and whether it is noise."""
    if point["status"] == "insufficient_history":
        return (f"report #{point['reportId']}: only {point['baselinePoints']} earlier "
                f"point(s); 3 are needed before a change is judged")
    moved = f"{point['changePercent']:+.1f} %"
    versus = (f"against the median {point['baseline']:.4g} ms of the "
              f"{point['baselinePoints']} earlier points; noise {point['noisePercent']:.1f} %")
    if point["status"] == "unchanged":
        return f"report #{point['reportId']}: {moved} {versus}: within the noise or the 5 % floor"
    return f"report #{point['reportId']}: {point['status']}, layer time {moved} {versus}"


def history_rows(points: list[dict[str, Any]]) -> list[list[Any]]:
    """The points' table, newest first."""
    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.4g}"

    return [[p["date"], f"#{p['reportId']}", ms(p["layerMS"]),
             f"{ms(p['windowMinMS'])} – {ms(p['windowMaxMS'])}",
             "n/a" if p["windowSpreadPercent"] is None else f"{p['windowSpreadPercent']:.1f} %",
             f"{p['usefulTFPerGPU']:.1f}",
             "n/a" if p["percentOfPeak"] is None else f"{p['percentOfPeak']:.1f} %",
             figures.verdict_text(p)]
            for p in reversed(points)]


@dataclass(frozen=True)
class ReportMarks:
    """The report's cases against their history: the flagged ones for the summary, and a
    mark per case for the table (``historyChange``, ``historyStatus``, ``historyHref``)."""

    verdicts: ReportVerdicts
    marks: dict[str, dict[str, Any]]

    @property
    def judged(self) -> int:
        return sum(1 for i in self.verdicts.items if i.verdict.status != "insufficient_history")


def report_marks(session: Session, report_id: int) -> ReportMarks:
    result = report_regressions(session, report_id)
    marks = {}
    for item in result.items:
        mark: dict[str, Any] = {"historyStatus": item.verdict.status,
                                "historyHref": history_path(item.case_id, result.gpu,
                                                            result.series)}
        if item.verdict.change_percent is not None:
            mark["historyChange"] = round(item.verdict.change_percent, 2)
        marks[item.case_id] = mark
    return ReportMarks(result, marks)


def hover_marks(marks: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The charts' hover notes of the flagged cases, from the report page's store of marks."""
    arrows = {"regression": "\u25b2", "improvement": "\u25bc"}
    return {case_id: f"{arrows[m['historyStatus']]} {m['historyChange']:+.1f} % vs history"
            for case_id, m in marks.items() if m["historyStatus"] in arrows}
