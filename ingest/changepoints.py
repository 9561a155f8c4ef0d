"""Change points of one series: E-Divisive means with a t-test, as Apache Otava (ex-Hunter,
Fleming et al., https://doi.org/10.1145/3578244.3583719) does it, over plain numbers.

1. Split: windows of ``window`` points slide along the series by half a window. In each
   window E-Divisive (Matteson & James) picks the split that maximises the energy
   statistic Q-hat, and a two-sided Student's t-test of the two pieces keeps it when
   p <= 10 x ``max_pvalue`` (the loose first pass); it then splits the pieces again until
   a split fails. The union over windows is the "weak" change points.
2. Merge: each weak change point is t-tested between its neighbours; the one with the
   largest p-value is dropped while that p-value is >= ``max_pvalue`` (or, once all pass,
   while the smallest change is <= ``min_magnitude_percent``), its neighbours retested.

Ours adds a minimum segment (``min_segment``): no split leaves fewer points on a side,
and the merge drops first any change point with a shorter segment beside it, so a single
outlier (two change points one point apart) is not a change, and a step at the tail is
reported once ``min_segment`` points sit after it. ``min_segment=1`` with ``otava_exact``
is Otava exactly (tests/test_changepoints.py runs Otava's test series). Otava's t-test is
SciPy's ``ttest_ind_from_stats`` fed population standard deviations (ddof 0), as ours.

Why not a library: ``apache-otava`` pins numpy 2.2 and pulls BigQuery, Slack and pg8000;
MongoDB's ``signal-processing-algorithms`` wants Python ~3.11, numpy < 2 and gevent.

Marks (``steps``, ``outliers``: indices into the series, as ``regressions.judge_series``
takes them): outlier points are taken out before detection, and a step mark cuts the
series into stretches detected apart, so a marked step is a known change point: never
reported, and no stretch's mean mixes both sides of it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ingest.student_t import two_sided_p

FloatArray = NDArray[np.float64]
# A series: a list of numbers or an array.
Values = Sequence[float] | NDArray[np.floating]


@dataclass(frozen=True)
class ChangePointSettings:
    window: int = 50
    max_pvalue: float = 1e-4
    min_segment: int = 5
    min_magnitude_percent: float = 0.0
    # True: Otava 0.8 exactly, for checking against its tests. Two differences otherwise.
    # Otava's merge, after dropping a change point, retests the two after it, so the one
    # before keeps its test from before the drop (stale, and a different choice at loose
    # p-values); ours retests both neighbours. Otava's next window starts at the last
    # change point a window found when that is further than half a window; ours stay on
    # the grid of half windows: a window starting right at a change point misplaced by a
    # point or two found the rest of the step ``min_segment`` later (one step, two change
    # points), and on the grid a tail recompute's windows are the full recompute's.
    otava_exact: bool = False

    def __post_init__(self) -> None:
        if self.window < 2:
            raise ValueError(f"window: at least 2 points, not {self.window}")
        if not 0.0 < self.max_pvalue < 1.0:
            raise ValueError(f"max_pvalue: strictly between 0 and 1, not {self.max_pvalue}")
        if self.min_segment < 1:
            raise ValueError(f"min_segment: at least 1 point, not {self.min_segment}")

    @property
    def first_pass_pvalue(self) -> float:
        """Otava's loose first pass: 10x p (2x from 0.05, p itself from 0.5)."""
        if self.max_pvalue < 0.05:
            return self.max_pvalue * 10
        return self.max_pvalue * 2 if self.max_pvalue < 0.5 else self.max_pvalue


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first index of the new segment
    before_mean: float
    after_mean: float
    change_percent: float  # after against before
    pvalue: float


class _Prefix:
    """Sums and sums of squares up to each index: a segment's mean and variance in O(1)."""

    def __init__(self, values: FloatArray) -> None:
        centred = values - (values.mean() if len(values) else 0.0)  # no cancellation
        self.shift = float(values.mean()) if len(values) else 0.0
        self.sums = np.concatenate(([0.0], np.cumsum(centred)))
        self.squares = np.concatenate(([0.0], np.cumsum(centred * centred)))

    def mean_var(self, start: int, stop: int) -> tuple[float, float]:
        """Mean and population variance (ddof 0, as Otava's np.std) of [start, stop)."""
        n = stop - start
        mean = (self.sums[stop] - self.sums[start]) / n
        var = max((self.squares[stop] - self.squares[start]) / n - mean * mean, 0.0)
        return float(mean) + self.shift, float(var)


def t_test(prefix: _Prefix, start: int, split: int, stop: int) -> tuple[float, float, float]:
    """Before mean, after mean, and the two-sided p of Student's t-test (pooled variance)
    of [start, split) against [split, stop)."""
    n1, n2 = split - start, stop - split
    mean1, var1 = prefix.mean_var(start, split)
    mean2, var2 = prefix.mean_var(split, stop)
    if n1 + n2 <= 2:
        return mean1, mean2, 1.0
    pooled = ((n1 - 1) * var1 + (n2 - 1) * var2) / (n1 + n2 - 2)
    difference = mean1 - mean2
    scale = math.sqrt(pooled * (1.0 / n1 + 1.0 / n2))
    if scale == 0.0:
        return mean1, mean2, 1.0 if difference == 0.0 else 0.0
    return mean1, mean2, two_sided_p(difference / scale, n1 + n2 - 2)


def _pair_sums(window: FloatArray) -> FloatArray:
    """C[a, b] = sum of |z_i - z_j| over i < j, i < a, j < b (zero-padded): every pair sum
    the energy statistic needs, each from four entries of C."""
    distances = np.triu(np.abs(window[:, None] - window[None, :]), 1)
    cumulative = np.zeros((len(window) + 1, len(window) + 1))
    cumulative[1:, 1:] = distances.cumsum(axis=0).cumsum(axis=1)
    return cumulative


@functools.lru_cache(maxsize=256)
def _q_weights(length: int, min_segment: int) -> tuple[FloatArray, FloatArray, FloatArray,
                                                      NDArray[np.bool_]]:
    """Q-hat's three weights over (tau, kappa) for an interval of ``length`` points, tau
    and kappa counted from its start: 2/(n+m), 2m/((n+m)(n-1)), 2n/((n+m)(m-1)) (a weight
    is 0 where its sum is empty), and which pairs leave both sides ``min_segment`` long."""
    n = np.arange(min_segment, length - min_segment + 1, dtype=np.float64)[:, None]
    kappa = np.arange(2 * min_segment, length + 1, dtype=np.float64)[None, :]
    m = kappa - n
    valid = m >= min_segment
    with np.errstate(divide="ignore", invalid="ignore"):
        between = np.where(valid, 2.0 / (n + m), 0.0)
        within_x = np.where(valid & (n > 1), 2.0 * m / ((n + m) * (n - 1)), 0.0)
        within_y = np.where(valid & (m > 1), 2.0 * n / ((n + m) * (m - 1)), 0.0)
    return between, within_x, within_y, valid


def best_split(sums: FloatArray, start: int, stop: int, min_segment: int) -> tuple[int, float]:
    """E-Divisive's candidate in [start, stop): the tau maximising over kappa
    Q(tau, kappa) = 2/(n+m) S_xy - 2m/((n+m)(n-1)) S_xx - 2n/((n+m)(m-1)) S_yy for
    X = z[start:tau] (n points), Y = z[tau:kappa] (m points), both at least
    ``min_segment`` long; the first maximum in (tau, kappa) order, as Otava's argmax.
    Every pair sum is four entries of ``sums`` (``_pair_sums``), so Q is a few array
    operations over the (tau, kappa) grid."""
    between_w, within_x_w, within_y_w, valid = _q_weights(stop - start, min_segment)
    taus = slice(start + min_segment, stop - min_segment + 1)
    kappas = slice(start + 2 * min_segment, stop + 1)
    diagonal = np.diagonal(sums)
    corner = sums[taus, kappas]  # pairs i < tau, j < kappa
    tau_diagonal = diagonal[taus][:, None]  # pairs i < j < tau
    from_start = sums[start, taus][:, None]  # pairs i < start, j < tau
    within_x = tau_diagonal - from_start
    within_y = diagonal[kappas][None, :] - corner
    between = corner - sums[start, kappas][None, :] - tau_diagonal + from_start
    q = between_w * between - within_x_w * within_x - within_y_w * within_y
    q = np.where(valid, q, -np.inf)
    flat = int(np.argmax(q))
    return start + min_segment + flat // q.shape[1], float(q.flat[flat])


def window_change_points(window: FloatArray, pvalue: float, min_segment: int) -> list[int]:
    """E-Divisive with a t-test inside one window: split while the best split passes."""
    sums, prefix = _pair_sums(window), _Prefix(window)
    found: list[int] = []
    candidates: dict[tuple[int, int], tuple[int, float]] = {}
    while True:
        bounds = [0, *found, len(window)]
        best: tuple[float, int, int, int] | None = None
        for start, stop in zip(bounds, bounds[1:], strict=False):
            if stop - start < 2 * min_segment:
                continue
            if (start, stop) not in candidates:
                candidates[start, stop] = best_split(sums, start, stop, min_segment)
            tau, q = candidates[start, stop]
            if best is None or q > best[0]:
                best = (q, tau, start, stop)
        if best is None:
            return found
        _, tau, start, stop = best
        if t_test(prefix, start, tau, stop)[2] > pvalue:
            return found
        found = sorted([*found, tau])


def split(values: FloatArray, settings: ChangePointSettings) -> list[int]:
    """The weak change points: windows sliding by half a window (Otava's also jump to the
    last change point a window found, when that is further)."""
    weak: set[int] = set()
    step = settings.window // 2
    start = 0
    while start < len(values):
        stop = min(start + settings.window, len(values))
        found = [start + i for i in window_change_points(
            values[start:stop], settings.first_pass_pvalue, settings.min_segment)]
        weak.update(found)
        jump = found[-1] if found and settings.otava_exact else 0
        start = max(jump, start + step)
    return sorted(weak)


def _magnitude(before: float, after: float) -> float:
    """Otava's change magnitude: the larger relative change of the two directions."""
    forward = after / before - 1.0 if before != 0 else 0.0
    backward = before / after - 1.0 if after != 0 else 0.0
    return max(abs(forward), abs(backward))


def _change_percent(before: float, after: float) -> float:
    return (after / before - 1.0) * 100.0 if before != 0 else 0.0


def merge(values: FloatArray, weak: Sequence[int],
          settings: ChangePointSettings) -> list[ChangePoint]:
    """Drop the weakest change point until every one passes (see the module's note)."""
    prefix = _Prefix(values)
    indices = list(weak)

    def stats(k: int) -> ChangePoint:
        start = indices[k - 1] if k > 0 else 0
        stop = indices[k + 1] if k + 1 < len(indices) else len(values)
        before, after, p = t_test(prefix, start, indices[k], stop)
        return ChangePoint(indices[k], before, after, _change_percent(before, after), p)

    points = [stats(k) for k in range(len(indices))]
    while points:
        bounds = [0, *indices, len(values)]
        short = [k for k in range(len(indices))
                 if min(bounds[k + 1] - bounds[k], bounds[k + 2] - bounds[k + 1])
                 < settings.min_segment]
        if short:
            weakest = max(short, key=lambda k: points[k].pvalue)
        else:
            weakest = max(range(len(points)), key=lambda k: points[k].pvalue)
            if points[weakest].pvalue < settings.max_pvalue:
                weakest = min(range(len(points)), key=lambda k: _magnitude(
                    points[k].before_mean, points[k].after_mean))
                smallest = _magnitude(points[weakest].before_mean, points[weakest].after_mean)
                if smallest * 100.0 > settings.min_magnitude_percent:
                    return points
        del indices[weakest], points[weakest]
        for k in (weakest, weakest + 1) if settings.otava_exact else (weakest - 1, weakest):
            if 0 <= k < len(points):
                points[k] = stats(k)
    return points


def refine(values: FloatArray, indices: Sequence[int],
           settings: ChangePointSettings) -> list[int]:
    """Each change point moved (left to right) less than ``min_segment`` points, to where
    it best splits the half windows beside it (the largest n1 n2 / (n1 + n2)
    (mean1 - mean2)^2, a mean shift's maximum likelihood), between its neighbours.

    The minimum segment bends E-Divisive's placement: with 4 points after a step it puts
    the change a point early (that point and the 4 make 5). Moved to the step, the change
    point leaves a segment too short, and the merge drops it until the 5th point."""
    sums = _Prefix(values).sums
    reach, half = settings.min_segment - 1, settings.window // 2
    placed = list(indices)
    for k, index in enumerate(placed):
        low = placed[k - 1] if k > 0 else 0
        high = placed[k + 1] if k + 1 < len(placed) else len(values)
        taus = np.arange(max(index - reach, low + 1), min(index + reach, high - 1) + 1)
        if len(taus) < 2:
            continue
        starts, stops = np.maximum(taus - half, low), np.minimum(taus + half, high)
        n1, n2 = taus - starts, stops - taus
        mean1 = (sums[taus] - sums[starts]) / n1
        mean2 = (sums[stops] - sums[taus]) / n2
        placed[k] = int(taus[int(np.argmax(n1 * n2 / (n1 + n2) * (mean1 - mean2) ** 2))])
    return sorted(set(placed))


def _detect(values: FloatArray, settings: ChangePointSettings) -> list[ChangePoint]:
    points = merge(values, split(values, settings), settings)
    if settings.otava_exact or settings.min_segment == 1 or not points:
        return points
    return merge(values, refine(values, [p.index for p in points], settings), settings)


def _kept_indices(length: int, outliers: Collection[int]) -> NDArray[np.int64]:
    """The indices of ``length`` points that are not marked outliers."""
    keep = np.ones(length, dtype=bool)
    marked = [i for i in outliers if 0 <= i < length]
    keep[marked] = False
    return np.flatnonzero(keep)


def find_change_points(values: Values,
                       settings: ChangePointSettings = ChangePointSettings(), *,
                       steps: Collection[int] = (),
                       outliers: Collection[int] = ()) -> list[ChangePoint]:
    """The change points of ``values`` (a series, oldest first), honouring the marks."""
    series = np.asarray(values, dtype=np.float64)
    if series.ndim != 1 or not np.all(np.isfinite(series)):
        raise ValueError("values: a sequence of finite numbers")
    kept = _kept_indices(len(series), outliers)
    cuts = sorted({0, len(kept), *(int(np.searchsorted(kept, s)) for s in steps)})
    found: list[ChangePoint] = []
    for start, stop in zip(cuts, cuts[1:], strict=False):
        for point in _detect(series[kept[start:stop]], settings):
            found.append(ChangePoint(int(kept[start + point.index]), point.before_mean,
                                     point.after_mean, point.change_percent, point.pvalue))
    return found


# An append recomputes at most this many windows of the series' end, and at least two.
TAIL_WINDOWS = 6


def find_change_points_tail(values: Values, known: Sequence[ChangePoint],
                            settings: ChangePointSettings = ChangePointSettings(), *,
                            steps: Collection[int] = (),
                            outliers: Collection[int] = ()) -> list[ChangePoint]:
    """What ``find_change_points`` says of ``values`` after points were appended, given
    ``known``, its answer before (in O(window) per call, not O(series)): the series from
    ``start`` on is detected afresh, the change points before ``start`` are kept.

    The fresh run starts on the windows' grid (multiples of half a window) a window or
    more before its first change point, so its windows are the full recompute's there.
    Its first change point may be the last known change point (or step mark) between
    ``TAIL_WINDOWS`` and two windows from the end, an "anchor" both runs have: the known
    change points before it are kept, it is retested against the segment now after it,
    and the fresh ones after it taken. Without an anchor, nothing is known between
    ``TAIL_WINDOWS`` and two windows from the end, and the fresh run's first window (its
    edge) is left to the known change points."""
    length = len(values)
    longest, shortest = TAIL_WINDOWS * settings.window, 2 * settings.window
    if length <= longest:
        return find_change_points(values, settings, steps=steps, outliers=outliers)
    grid = settings.window // 2
    boundaries = sorted({p.index for p in known} | set(steps))
    anchors = [b for b in boundaries if length - longest <= b <= length - shortest]
    if anchors:
        origin = max(anchors[-1] - settings.window, 0) // grid * grid
        cut = anchors[-1] + 1
    else:
        origin = (length - longest) // grid * grid
        cut = origin + settings.window
    fresh = [ChangePoint(p.index + origin, p.before_mean, p.after_mean, p.change_percent,
                         p.pvalue)
             for p in find_change_points(values[origin:], settings,
                                         steps=[s - origin for s in steps if s > origin],
                                         outliers=[o - origin for o in outliers if o >= origin])
             if p.index + origin >= cut]
    kept = [p for p in known if p.index < cut]
    if anchors and kept and kept[-1].index == anchors[-1]:
        lower = max([b for b in boundaries if b < anchors[-1]], default=0)
        upper = fresh[0].index if fresh else length
        kept[-1] = _retest(values, lower, anchors[-1], upper, outliers)
    return kept + fresh


def _retest(values: Values, start: int, split: int, stop: int,
            outliers: Collection[int]) -> ChangePoint:
    """The change point at ``split`` tested between [start, split) and [split, stop)."""
    series = np.asarray(values[start:stop], dtype=np.float64)
    kept = _kept_indices(len(series), [o - start for o in outliers])
    prefix = _Prefix(series[kept])
    before, after, p = t_test(prefix, 0, int(np.searchsorted(kept, split - start)), len(kept))
    return ChangePoint(split, before, after, _change_percent(before, after), p)
