"""What the change-point detector can see on one series: its noise, the smallest step it
would catch at the current settings, and how often it cried wolf (alerts marked
``invalid`` over the points it has seen). Pure functions over plain numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ingest.changepoints import DEFAULT_SETTINGS, ChangePointSettings, Values
from ingest.student_t import critical_t

MAD_TO_SIGMA = 1.4826  # a normal distribution's sigma over its MAD
Z_90 = 1.2816  # the standard normal's 90th percentile
MIN_POINTS = 3


def noise_percent(values: Values) -> float | None:
    """One point's noise, percent of the series' median: 1.4826 x the MAD of successive
    differences / sqrt(2). A difference of two independent points has sqrt(2) their
    spread; a step moves one difference only, and an outlier two, so neither steps nor
    outliers inflate it as they would a plain standard deviation. None below 3 points or
    at a median of 0."""
    series = np.asarray(values, dtype=np.float64)
    if len(series) < MIN_POINTS or np.median(series) == 0:
        return None
    differences = np.diff(series)
    mad = np.median(np.abs(differences - np.median(differences)))
    return float(MAD_TO_SIGMA * mad / math.sqrt(2) / abs(np.median(series)) * 100)


def smallest_step_percent(noise: float,
                          settings: ChangePointSettings = DEFAULT_SETTINGS) -> float:
    """The step (percent) caught 9 times in 10 at ``noise`` percent of noise.

    The detector t-tests a step with half a window of points on each side (n = window /
    2: its windows slide by half a window, and a tail step is judged once the points
    after it fill one); the t of a step d is d / (noise x sqrt(2 / n)) on average, with
    2n - 2 degrees of freedom. It passes the threshold t_p (two-sided p = max_pvalue)
    9 times in 10 when its mean is t_p + z_0.9 (the t wobbles by about 1 around its
    mean), so

        smallest step = (t_p + 1.2816) x noise x sqrt(2 / n),

    and never below ``min_magnitude_percent``. At window 50 and p = 1e-4 (t_p = 4.24 at
    48 degrees of freedom): 1.56 x the noise. bench/changepoints.py measures it."""
    half = settings.window // 2
    t_p = critical_t(settings.max_pvalue, max(2 * half - 2, 1))
    return max((t_p + Z_90) * noise * math.sqrt(2 / half), settings.min_magnitude_percent)


def false_alarms_per_1000(invalid_alerts: int, points_seen: int) -> float | None:
    """Alerts marked ``invalid`` per 1,000 points of the series; None before any point."""
    if points_seen <= 0:
        return None
    return invalid_alerts / points_seen * 1000


@dataclass(frozen=True)
class Limits:
    noise_percent: float | None
    smallest_step_percent: float | None
    false_alarms_per_1000: float | None


def series_limits(values: Sequence[float], invalid_alerts: int,
                  settings: ChangePointSettings = DEFAULT_SETTINGS) -> Limits:
    """The three limits of one series, as the history and an alert show them."""
    noise = noise_percent(values)
    return Limits(noise, None if noise is None else smallest_step_percent(noise, settings),
                  false_alarms_per_1000(invalid_alerts, len(values)))


def limits_text(limits: Limits) -> str:
    """The limits in one line, as the history and an alert say them."""
    if limits.noise_percent is None:
        return "change points: too few points to know this series' noise yet"
    seen = (f"change points: noise {limits.noise_percent:.2g} %, smallest step caught "
            f"{limits.smallest_step_percent:.2g} %")
    alarms = limits.false_alarms_per_1000
    if alarms is None:
        return seen
    return f"{seen}, false alarms {alarms:.2g} per 1,000 points (alerts triaged invalid)"
