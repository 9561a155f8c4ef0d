"""Student's t distribution: the two-sided tail and its inverse, pure Python.

The change-point detector's t-test needs p-values, and its limits need the critical t for a
p-value. SciPy is not in the base install for two functions, so here they are: the tail
through the regularised incomplete beta function (Numerical Recipes' continued fraction,
Lentz's method), the inverse by bisection on it.
"""

from __future__ import annotations

import math

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
