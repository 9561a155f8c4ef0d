"""The change points' word on the noise judge's verdicts (``ingest.regressions``).

The judge looks first, at each newest point against a recent median, and may flag it at
once; the change-point detector needs ``min_segment`` points after a change to see it.
So a verdict on a point is, against the change points found by the time the series
reaches ``newest_index``:

- ``confirmed``: flagged, and a change point in the same direction starts at the point or
  less than a window before it (the judge keeps flagging a step's first points until its
  median catches up);
- ``pending``: flagged, no such change point, fewer than ``min_segment`` points from it on
  (too early to tell);
- ``overruled``: flagged, no such change point although ``min_segment`` points followed:
  the series went back, the point was an outlier. (Anything the judge flags is larger than
  its noise band, z = 3.5 robust sigmas; kept for 5 points it makes a t of more than
  3.5 x sqrt(5) = 7.8, far past p = 1e-4: a change that stayed is found by then.)
- ``found``: not flagged, but a change point starts at the point (a change smaller than
  the judge's threshold, e.g. a creeping regression);
- ``quiet``: neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ingest.changepoints import DEFAULT_SETTINGS, ChangePoint, ChangePointSettings
from ingest.regressions import Verdict

Outcome = Literal["confirmed", "pending", "overruled", "found", "quiet"]


@dataclass(frozen=True)
class Confirmation:
    outcome: Outcome
    change_point: ChangePoint | None = None  # the one that confirms, or that was found


def confirm(verdict: Verdict, change_points: Sequence[ChangePoint], newest_index: int, *,
            judged_index: int | None = None,
            settings: ChangePointSettings = DEFAULT_SETTINGS) -> Confirmation:
    """What the change points say of ``verdict``, the judge's on the point at
    ``judged_index`` (the newest point unless given). The series is a time (the judge's
    ``layerMS``, or a phase's): a change point up is a regression."""
    index = newest_index if judged_index is None else judged_index
    if not verdict.flagged:
        at = next((p for p in change_points if p.index == index), None)
        return Confirmation("found", at) if at is not None else Confirmation("quiet")
    before = [p for p in change_points if index - settings.window < p.index <= index]
    same_way = before and (before[-1].change_percent > 0) == (verdict.status == "regression")
    if same_way:
        return Confirmation("confirmed", before[-1])
    if newest_index - index + 1 < settings.min_segment:
        return Confirmation("pending")
    return Confirmation("overruled")
