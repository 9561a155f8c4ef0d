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

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from ingest.changepoints import (
    DEFAULT_SETTINGS,
    ChangePoint,
    ChangePointSettings,
    find_change_points,
)
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


def confirmation_text(values: Sequence[float], verdicts: Sequence[Verdict],
                      labels: Sequence[str], *, steps: Collection[int] = (),
                      outliers: Collection[int] = (),
                      settings: ChangePointSettings = DEFAULT_SETTINGS) -> str:
    """The change points' word, in words, on the newest point the judge flagged less than
    a window ago (else on the newest point); ``labels`` name the points ("report #7").
    '' when there is nothing to say (a quiet series)."""
    if not values:
        return ""
    newest = len(values) - 1
    flagged = [i for i, v in enumerate(verdicts) if v.flagged and newest - i < settings.window]
    judged = flagged[-1] if flagged else newest
    points = find_change_points(values, settings, steps=steps, outliers=outliers)
    c = confirm(verdicts[judged], points, newest, judged_index=judged, settings=settings)
    at = (f"{labels[c.change_point.index]} ({c.change_point.change_percent:+.1f} %)"
          if c.change_point is not None else "")
    return {
        "confirmed": f"change points: a change at {at} confirms the flag on {labels[judged]}",
        "pending": (f"change points: none yet for the flag on {labels[judged]}; "
                    f"{settings.min_segment - (newest - judged + 1)} more report(s) will "
                    "tell a change from an outlier"),
        "overruled": (f"change points: none followed the flag on {labels[judged]}: an "
                      "outlier, not a change"),
        "found": f"change points: a change at {at} that the noise judge did not flag",
        "quiet": "",
    }[c.outcome]
