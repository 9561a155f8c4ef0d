"""Which cases of a report moved, for alerts: the change points (``ingest.changepoints``)
of each case's series tail that no alert has told yet. A change point needs
``min_segment`` points after it, so a step is told that many reports after it happened
(its first bad report), and a single outlier never is; the noise judge's flag on the
newest point (the report page's "against history") is the first look, not an alert.
Reads what ingest needs and no more: each case's last TAIL_REPORTS points of its baseline
(marks honoured: a step restarts it, outliers are left out)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.repository import alerts as alerts_repo
from app.repository import history as history_repo
from ingest.changepoints import ChangePointSettings, find_change_points

# A change point found again may sit a point or two from where it was first found (more
# points after it move the best split): within this many reports it is the same change.
SAME_CHANGE_REPORTS = 2
# Smaller changes are not worth an alert however sure (a quiet case's 0.1 % shift passes
# any t-test); a 3 % step must still be caught (DESIGN.md "Alerts").
MIN_CHANGE_PERCENT = 2.0
DETECTION = ChangePointSettings(min_magnitude_percent=MIN_CHANGE_PERCENT)
# The earlier reports a new report's change points are looked for in: with the report,
# one detection window (ChangePointSettings.window); a change must show within them to be
# told at ingest (a full rebuild sees the whole series). Two windows' worth cost twice the
# time for changes that the first window's 44 points before a step already show.
TAIL_REPORTS = DETECTION.window - 1


@dataclass(frozen=True)
class Moved:
    """A case that moved at ``first_bad_report_id`` by ``change_percent`` of its level
    before; ``last_good_report_id`` the case's point before it."""

    case_id: str
    status: str  # regression, improvement
    change_percent: float
    first_bad_report_id: int
    last_good_report_id: int | None


def _status(change_percent: float) -> str:
    return "regression" if change_percent > 0 else "improvement"


def changes_in(case_id: str, tail: Sequence[alerts_repo.TailPoint],
               settings: ChangePointSettings) -> list[Moved]:
    """Every change point of one case's tail, as a move at its first report."""
    points = find_change_points([p.layer_ms for p in tail], settings)
    return [Moved(case_id, _status(cp.change_percent), cp.change_percent,
                  tail[cp.index].report_id, tail[cp.index - 1].report_id)
            for cp in points if abs(cp.change_percent) >= MIN_CHANGE_PERCENT]


def _told(moved: Moved, tail: Sequence[alerts_repo.TailPoint],
          told: set[tuple[str, int]]) -> bool:
    at = next(i for i, p in enumerate(tail) if p.report_id == moved.first_bad_report_id)
    near = tail[max(0, at - SAME_CHANGE_REPORTS):at + SAME_CHANGE_REPORTS + 1]
    return any((moved.case_id, p.report_id) in told for p in near)


def moved_cases(session: Session, report_id: int,
                settings: ChangePointSettings | None = None) -> list[Moved]:
    """Every change the report's cases show that no other report's alert has told."""
    settings = settings or DETECTION
    position = history_repo.report_position(session, report_id)
    baseline = history_repo.baseline_of(session, position)
    tails = alerts_repo.tail_points(session, position, baseline, TAIL_REPORTS)
    found = [(m, tail) for case_id, tail in tails.items()
             for m in changes_in(case_id, tail, settings)]
    if not found:
        return []
    told = alerts_repo.alerted_changes(
        session, position.series, {m.case_id for m, _ in found},
        {p.report_id for _, tail in found for p in tail}, report_id)
    return [m for m, tail in found if not _told(m, tail, told)]
