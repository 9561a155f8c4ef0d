"""A full recompute of the alerts (``moescope alerts rebuild``): every series read once,
each case's whole series through the change-point detector (marks honoured), the changes
grouped into alerts as ingest groups them. Alerts someone triaged are kept as they are and
their changes not opened again; every other alert is replaced. No webhook is sent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.repository import alerts as alerts_repo
from app.repository import marks as marks_repo
from app.services.alert_detect import DETECTION, MIN_CHANGE_PERCENT, Moved
from app.services.alerts import build_alerts
from ingest.changepoints import ChangePointSettings, find_change_points


@dataclass(frozen=True)
class Rebuilt:
    series: int
    opened: int
    kept: int  # triaged alerts left as they were


def case_changes(case_id: str, points: Sequence[tuple[int, float, float | None]],
                 report_ids: Sequence[int], steps: set[int], outliers: set[int],
                 settings: ChangePointSettings) -> list[Moved]:
    """Every change point of one case's whole series (``points``: its index in the series'
    report order, layer time, spread), as a move at its first report."""
    at = [i for i, _, _ in points]
    found = find_change_points(
        [v for _, v, _ in points], settings,
        steps=[k for k, i in enumerate(at) if report_ids[i] in steps],
        outliers=[k for k, i in enumerate(at) if report_ids[i] in outliers])
    return [Moved(case_id, "regression" if cp.change_percent > 0 else "improvement",
                  cp.change_percent, report_ids[at[cp.index]], report_ids[at[cp.index - 1]])
            for cp in found if abs(cp.change_percent) >= MIN_CHANGE_PERCENT]


def _series_moves(session: Session, series: str, settings: ChangePointSettings
                  ) -> dict[int, list[Moved]]:
    """The series' changes by the report whose ingest would have told them: the first bad
    one's ``min_segment``-th report (its segment complete), or the newest."""
    report_ids, points = alerts_repo.series_point_matrix(session, series)
    marks = marks_repo.series_marks(session, series)
    steps = {m.report_id for m in marks if m.kind == "step"}
    outliers = {m.report_id for m in marks if m.kind == "outlier"}
    place = {r: i for i, r in enumerate(report_ids)}
    by_opener: dict[int, list[Moved]] = {}
    for case_id, case_points in points.items():
        for moved in case_changes(case_id, case_points, report_ids, steps, outliers,
                                  settings):
            opener = report_ids[min(place[moved.first_bad_report_id] + settings.min_segment
                                    - 1, len(report_ids) - 1)]
            by_opener.setdefault(opener, []).append(moved)
    return by_opener


def rebuild(session: Session, settings: ChangePointSettings = DETECTION) -> Rebuilt:
    """Recompute every alert, in the caller's transaction."""
    triaged = alerts_repo.triaged_keys(session)
    alerts_repo.delete_untriaged(session)
    opened = 0
    every = alerts_repo.all_series(session)
    for series in every:
        for opener, moved in sorted(_series_moves(session, series, settings).items()):
            for key, alert in build_alerts(session, opener, moved).items():
                if key not in triaged:
                    alerts_repo.insert_alert(session, alert)
                    opened += 1
    return Rebuilt(len(every), opened, len(triaged))
