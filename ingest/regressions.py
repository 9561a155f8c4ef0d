"""Regression detection on one series, pure functions over plain numbers.

A case's newest layer time is compared with the median of the series' recent history
(the last ``window`` earlier points). It is flagged only when the change is both larger
than ``threshold_percent`` and larger than the noise that explains ordinary movement:

    noise % = max( z · 1.4826 · MAD(history) / median(history) · 100,   # run-to-run spread
                   the newest case's own window spread %,                # its in-run spread
                   the median window spread % of the history )

MAD · 1.4826 estimates a standard deviation that one outlier cannot inflate (conbench's
z-score, made robust, since a series here is short); the window spreads (max − min over
median of ``windows.combined``) say how far one run can move on its own, which a short
history cannot know. Fewer than ``min_points`` earlier points: no verdict, say so.

Known changes (``judge_series``): a report marked as a step starts a new baseline (it and
the reports after it are judged only against reports from it on), and a report marked as
an outlier is judged but never part of a baseline.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

DEFAULT_THRESHOLD_PERCENT = 5.0
DEFAULT_WINDOW = 20
DEFAULT_Z = 3.5  # Iglewicz & Hoaglin's cut-off for the robust (modified) z-score
MIN_BASELINE_POINTS = 3
# MAD x 1.4826 is the standard deviation of a normal distribution with that MAD.
MAD_TO_SIGMA = 1.4826
METRIC = "layerMS"

Status = Literal["regression", "improvement", "unchanged", "insufficient_history"]


@dataclass(frozen=True)
class Point:
    """One measurement of a series: its layer time and its windows' spread (percent)."""

    layer_ms: float
    window_spread_percent: float | None


@dataclass(frozen=True)
class Verdict:
    status: Status
    baseline_points: int
    baseline: float | None = None
    change_percent: float | None = None
    noise_percent: float | None = None
    metric: str = METRIC

    @property
    def flagged(self) -> bool:
        return self.status in ("regression", "improvement")


@dataclass(frozen=True)
class Settings:
    threshold_percent: float = DEFAULT_THRESHOLD_PERCENT
    window: int = DEFAULT_WINDOW
    z: float = DEFAULT_Z
    min_points: int = MIN_BASELINE_POINTS


def noise_percent(history: Sequence[Point], newest: Point, baseline: float, z: float) -> float:
    """How far (percent of the baseline) the newest point may move without being news."""
    mad = statistics.median(abs(p.layer_ms - baseline) for p in history)
    spreads = [p.window_spread_percent for p in history if p.window_spread_percent is not None]
    return max(
        z * MAD_TO_SIGMA * mad / baseline * 100,
        newest.window_spread_percent or 0.0,
        statistics.median(spreads) if spreads else 0.0,
    )


def judge(history: Sequence[Point], newest: Point, settings: Settings | None = None) -> Verdict:
    """The verdict on ``newest`` given the earlier points of its series, oldest first."""
    settings = settings or Settings()
    # The last `window` points only: a caller passing a whole series still pays O(window).
    recent = list(history)[-settings.window:] if len(history) > settings.window else history
    if len(recent) < settings.min_points:
        return Verdict("insufficient_history", baseline_points=len(recent))
    baseline = statistics.median(p.layer_ms for p in recent)
    change = (newest.layer_ms - baseline) / baseline * 100
    noise = noise_percent(recent, newest, baseline, settings.z)
    status: Status = "unchanged"
    if abs(change) > settings.threshold_percent and abs(change) > noise:
        status = "regression" if change > 0 else "improvement"
    return Verdict(status, baseline_points=len(recent), baseline=baseline,
                   change_percent=change, noise_percent=noise)


def judge_series(
    points: Sequence[Point], settings: Settings | None = None, *,
    steps: Collection[int] = (), outliers: Collection[int] = (), first: int = 0,
) -> list[Verdict]:
    """The verdict on each of ``points[first:]`` (a series, oldest first) against the points
    before it, in one pass: a sliding window of the last ``window`` baseline points makes
    each verdict O(window), the series O(n · window). ``steps`` and ``outliers`` are
    indices into ``points`` (see the module's note)."""
    settings = settings or Settings()
    recent: deque[Point] = deque(maxlen=settings.window)
    verdicts = []
    for i, point in enumerate(points):
        if i in steps:
            recent.clear()
        if i >= first:
            verdicts.append(judge(recent, point, settings))
        if i not in outliers:
            recent.append(point)
    return verdicts
