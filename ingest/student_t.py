"""Student's t: the distribution's two-sided tail and its inverse, and the two-sample
t-test on segments of a series.

The change-point detector's t-test needs p-values, and its limits need the critical t for a
p-value. SciPy is not in the base install for two functions, so here they are: the tail
through the regularised incomplete beta function (Numerical Recipes' continued fraction,
Lentz's method), the inverse by bisection on it.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

_EPS = 1e-15
_TINY = 1e-300
_MAX_TERMS = 300


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (converges fast for x < (a + 1) / (a + b + 2))."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, _MAX_TERMS + 1):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            result *= c * d
        if abs(c * d - 1.0) < _EPS:
            break
    return result


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isnan(t):
        return 1.0
    if math.isinf(t):
        return 0.0
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def critical_t(p: float, df: float) -> float:
    """The |t| whose two-sided p-value is ``p`` (bisection: the tail falls monotonically)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p: must lie strictly between 0 and 1, not {p}")
    low, high = 0.0, 1.0
    while two_sided_p(high, df) > p:
        high *= 2.0
    for _ in range(100):
        middle = (low + high) / 2.0
        if two_sided_p(middle, df) > p:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


class Prefix:
    """Sums and sums of squares up to each index: a segment's mean and variance in O(1)."""

    def __init__(self, values: NDArray[np.float64]) -> None:
        centred = values - (values.mean() if len(values) else 0.0)  # no cancellation
        self.shift = float(values.mean()) if len(values) else 0.0
        self.sums = np.concatenate(([0.0], np.cumsum(centred)))
        self.squares = np.concatenate(([0.0], np.cumsum(centred * centred)))

    def mean_var(self, start: int, stop: int,
                 without: float | None = None) -> tuple[int, float, float]:
        """Count, mean and population variance (ddof 0, as Otava's np.std) of
        [start, stop), ``without`` one point of that value if given."""
        n = stop - start
        total = self.sums[stop] - self.sums[start]
        squares = self.squares[stop] - self.squares[start]
        if without is not None:
            dropped = without - self.shift
            n, total, squares = n - 1, total - dropped, squares - dropped * dropped
        mean = total / n
        return n, float(mean) + self.shift, max(float(squares / n - mean * mean), 0.0)


def pooled_p(n1: int, mean1: float, var1: float, n2: int, mean2: float, var2: float) -> float:
    """The two-sided p of Student's t-test with pooled variance, from each side's count,
    mean and population variance (as SciPy's ttest_ind_from_stats given np.std)."""
    if n1 + n2 <= 2:
        return 1.0
    pooled = ((n1 - 1) * var1 + (n2 - 1) * var2) / (n1 + n2 - 2)
    difference = mean1 - mean2
    scale = math.sqrt(pooled * (1.0 / n1 + 1.0 / n2))
    if scale == 0.0:
        return 1.0 if difference == 0.0 else 0.0
    return two_sided_p(difference / scale, n1 + n2 - 2)


def t_test(prefix: Prefix, start: int, split: int, stop: int) -> tuple[float, float, float]:
    """Before mean, after mean, and the t-test's p of [start, split) against [split, stop)."""
    before, after = prefix.mean_var(start, split), prefix.mean_var(split, stop)
    return before[1], after[1], pooled_p(*before, *after)
