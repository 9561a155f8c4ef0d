"""The change points against the noise judge (``ingest.change_confirm``), and the
detector's limits per series (``ingest.detector_limits``), on series built here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ingest.change_confirm import confirm
from ingest.changepoints import ChangePointSettings, FloatArray, find_change_points
from ingest.detector_limits import (
    Limits,
    false_alarms_per_1000,
    noise_percent,
    series_limits,
    smallest_step_percent,
)
from ingest.regressions import Point, Verdict, judge


def noisy(levels: list[tuple[int, float]], seed: int, noise: float = 0.01) -> FloatArray:
    level = np.concatenate([np.full(count, value) for count, value in levels])
    rng = np.random.default_rng(seed)
    return np.asarray(10.0 * level * (1.0 + noise * rng.standard_normal(len(level))),
                      dtype=np.float64)


def verdict_on(values: FloatArray, index: int) -> Verdict:
    return judge([Point(float(v), None) for v in values[:index]], Point(float(values[index]),
                                                                        None))


def test_a_step_is_pending_then_confirmed() -> None:
    values = noisy([(100, 1.0), (20, 1.10)], seed=1)
    first = verdict_on(values, 100)
    assert first.status == "regression"
    for newest in range(100, 104):  # fewer than 5 points from the step on
        found = find_change_points(values[:newest + 1])
        assert confirm(first, found, newest, judged_index=100).outcome == "pending"
    found = find_change_points(values[:105])
    confirmation = confirm(first, found, 104, judged_index=100)
    assert confirmation.outcome == "confirmed"
    assert confirmation.change_point is not None and confirmation.change_point.index == 100
    # The judge still flags the newest point against its older median: the same change.
    on_newest = verdict_on(values, 104)
    assert on_newest.status == "regression"
    assert confirm(on_newest, found, 104).outcome == "confirmed"


def test_an_outlier_is_overruled() -> None:
    values = noisy([(120, 1.0)], seed=2)
    values[100] *= 1.3
    flagged = verdict_on(values, 100)
    assert flagged.status == "regression"
    assert confirm(flagged, find_change_points(values[:103]), 102,
                   judged_index=100).outcome == "pending"
    assert confirm(flagged, find_change_points(values[:105]), 104,
                   judged_index=100).outcome == "overruled"
    assert confirm(flagged, find_change_points(values), 119,
                   judged_index=100).outcome == "overruled"


def test_a_creeping_step_the_judge_missed_is_found() -> None:
    values = noisy([(60, 1.0), (7, 1.04), (30, 1.04 * 1.04)], seed=3)
    quiet = verdict_on(values, 60)
    assert quiet.status == "unchanged"  # +4 %: under the judge's 5 % threshold
    found = find_change_points(values)
    confirmation = confirm(quiet, found, len(values) - 1, judged_index=60)
    assert confirmation.outcome == "found"
    assert confirmation.change_point is not None and confirmation.change_point.index == 60
    assert confirm(quiet, found, len(values) - 1, judged_index=30).outcome == "quiet"


def test_a_change_the_other_way_does_not_confirm() -> None:
    values = noisy([(100, 1.0), (20, 0.9)], seed=4)  # 10 % faster
    found = find_change_points(values)
    assert [p.index for p in found] == [100]
    slower = Verdict("regression", baseline_points=20, baseline=10.0, change_percent=8.0,
                     noise_percent=1.0)
    assert confirm(slower, found, 110, judged_index=105).outcome == "overruled"
    faster = verdict_on(values, 105)
    assert faster.status == "improvement"
    assert confirm(faster, found, 110, judged_index=105).outcome == "confirmed"


# The detector's limits ---------------------------------------------------------------

def test_noise_by_hand() -> None:
    values = [10.0, 10.2, 10.0, 10.2, 10.0, 10.2, 10.0]
    # Six differences, three +0.2 and three -0.2: median 0, every |d - 0| is 0.2, so the
    # MAD is 0.2; the values' median is 10.0.
    want = 1.4826 * 0.2 / math.sqrt(2) / 10.0 * 100
    assert noise_percent(values) == pytest.approx(want)
    assert noise_percent([10.0, 10.0]) is None
    assert noise_percent([0.0, 0.0, 0.0]) is None


def test_noise_ignores_steps_and_outliers() -> None:
    values = noisy([(3000, 1.0), (3000, 1.2), (3000, 0.9)], seed=5)
    values[[100, 4000, 8000]] *= 1.5
    assert noise_percent(values) == pytest.approx(1.0, rel=0.05)  # the noise put in
    assert np.std(values) / np.median(values) * 100 > 8  # what a plain sigma would say


def test_smallest_step_by_hand() -> None:
    # Half a window of 50 is 25 points a side; t at p = 1e-4 with 48 degrees of freedom
    # is 4.2435 (t tables); z at 90 % is 1.2816.
    want = (4.2435 + 1.2816) * 2.0 * math.sqrt(2 / 25)
    assert smallest_step_percent(2.0) == pytest.approx(want, rel=1e-4)
    floor = ChangePointSettings(min_magnitude_percent=5.0)
    assert smallest_step_percent(2.0, floor) == 5.0
    # A looser p or a longer window catches smaller steps.
    assert smallest_step_percent(2.0, ChangePointSettings(max_pvalue=1e-2)) < want
    assert smallest_step_percent(2.0, ChangePointSettings(window=100)) < want


def test_false_alarm_rate() -> None:
    assert false_alarms_per_1000(3, 6000) == pytest.approx(0.5)
    assert false_alarms_per_1000(0, 0) is None
    limits = series_limits(list(noisy([(2000, 1.0)], seed=6)), invalid_alerts=1)
    assert limits.false_alarms_per_1000 == pytest.approx(0.5)
    assert limits.noise_percent == pytest.approx(1.0, rel=0.1)
    assert limits.smallest_step_percent == pytest.approx(
        smallest_step_percent(limits.noise_percent or 0.0))
    assert series_limits([1.0], 0) == Limits(None, None, 0.0)
