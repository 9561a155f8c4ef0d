"""Change points of one series: E-Divisive means with a t-test, as Apache Otava (ex-Hunter,
Fleming et al., https://doi.org/10.1145/3578244.3583719) does it, over plain numbers.
Over 350 lines: the split, the merge and the tail recompute share their statistics and
must agree point for point (tests/test_changepoints.py), so they stay in one module.

1. Split: windows of ``window`` points slide along the series by half a window. In each
   window E-Divisive (Matteson & James) picks the split that maximises the energy
   statistic Q-hat, and a two-sided Student's t-test of the two pieces keeps it when
   p <= 10 x ``max_pvalue`` (the loose first pass); it then splits the pieces again until
   a split fails. The union over windows is the "weak" change points.
2. Merge: each weak change point is t-tested between its neighbours; the one with the
   largest p-value is dropped while that p-value is >= ``max_pvalue`` (or, once all pass,
   while the smallest change is <= ``min_magnitude_percent``), its neighbours retested.

Ours differs from Otava where a benchmark series needs it (``otava_exact=True`` with
``min_segment=1`` is Otava exactly: tests/test_changepoints.py runs Otava's test series):

- A minimum segment (``min_segment``): no split leaves fewer points on a side, and the
  merge drops first any change point with a shorter segment beside it, so a single
  outlier (two change points one point apart) is not a change, and a step at the tail
  is reported once ``min_segment`` points sit after it.
- A change that fails its test without one point of a segment shorter than a window
  (``rests_on_one_point``) is dropped first too: an outlier among a step's first points.
- Each change point is then moved, by less than ``min_segment``, to its best split
  (``refine``), and merged again.
- The windows stay on a grid and the merge retests both neighbours
  (``ChangePointSettings.otava_exact`` says why).

Otava's t-test is SciPy's ``ttest_ind_from_stats`` fed population standard deviations
(ddof 0); ours is the same arithmetic (``student_t.t_test``).

Why not a library: ``apache-otava`` pins numpy 2.2 and pulls BigQuery, Slack and pg8000;
MongoDB's ``signal-processing-algorithms`` wants Python ~3.11, numpy < 2 and gevent.

Marks (``steps``, ``outliers``: indices into the series, as ``regressions.judge_series``
takes them): outlier points are taken out before detection, and a step mark cuts the
series into stretches detected apart, so a marked step is a known change point: never
reported, and no stretch's mean mixes both sides of it.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ingest.student_t import Prefix, pooled_p, t_test

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
        if not 1 <= self.min_segment <= self.window // 2:
            raise ValueError(f"min_segment: from 1 to half the window ({self.window // 2}) "
                             f"points, not {self.min_segment}")

    @property
    def first_pass_pvalue(self) -> float:
        """Otava's loose first pass: 10x p (2x from 0.05, p itself from 0.5)."""
        if self.max_pvalue < 0.05:
            return self.max_pvalue * 10
        return self.max_pvalue * 2 if self.max_pvalue < 0.5 else self.max_pvalue


DEFAULT_SETTINGS = ChangePointSettings()


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first index of the new segment
    before_mean: float
    after_mean: float
    change_percent: float  # after against before
    pvalue: float


def rests_on_one_point(values: FloatArray, prefix: Prefix, start: int, split: int,
                       stop: int, settings: ChangePointSettings) -> bool:
    """Whether the change at ``split`` fails its test without one point: the one that
    helps it most on a side shorter than a window (a 30 % outlier among the first 5
    points after an ordinary change point makes a t of 7)."""
    before, after = prefix.mean_var(start, split)[1], prefix.mean_var(split, stop)[1]
    up = after > before
    for side, (low, high) in enumerate(((start, split), (split, stop))):
        if high - low >= settings.window or high - low < 2:
            continue
        segment = values[low:high]
        helper = float(segment.max() if up == (side == 1) else segment.min())
        kept = [prefix.mean_var(start, split), prefix.mean_var(split, stop)]
        kept[side] = prefix.mean_var(low, high, without=helper)
        if pooled_p(*kept[0], *kept[1]) >= settings.max_pvalue:
            return True
    return False


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
    sums, prefix = _pair_sums(window), Prefix(window)
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


# An append changes a series' last window or two; the tail recompute's other windows are
# the previous append's, on the same grid, and come from here (63 series x up to 22
# windows a report).
@functools.lru_cache(maxsize=8192)
def _known_window(window: bytes, pvalue: float, min_segment: int) -> tuple[int, ...]:
    return tuple(window_change_points(np.frombuffer(window), pvalue, min_segment))


def split(values: FloatArray, settings: ChangePointSettings) -> list[int]:
    """The weak change points: windows sliding by half a window (Otava's also jump to the
    last change point a window found, when that is further)."""
    weak: set[int] = set()
    step = settings.window // 2
    start = 0
    while start < len(values):
        stop = min(start + settings.window, len(values))
        found = [start + i for i in _known_window(
            values[start:stop].tobytes(), settings.first_pass_pvalue, settings.min_segment)]
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
    prefix = Prefix(values)
    indices = list(weak)

    def stats(k: int) -> ChangePoint:
        start = indices[k - 1] if k > 0 else 0
        stop = indices[k + 1] if k + 1 < len(indices) else len(values)
        before, after, p = t_test(prefix, start, indices[k], stop)
        fragile[indices[k]] = (settings.min_segment > 1 and not settings.otava_exact
                               and rests_on_one_point(values, prefix, start, indices[k],
                                                      stop, settings))
        return ChangePoint(indices[k], before, after, _change_percent(before, after), p)

    fragile: dict[int, bool] = {}
    points = [stats(k) for k in range(len(indices))]
    while points:
        bounds = [0, *indices, len(values)]
        short = [k for k in range(len(indices)) if fragile[indices[k]]
                 or min(bounds[k + 1] - bounds[k], bounds[k + 2] - bounds[k + 1])
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
    sums = Prefix(values).sums
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


def _detect(values: FloatArray, settings: ChangePointSettings,
            first: int = 0) -> list[ChangePoint]:
    """The change points of ``values``; after ``first`` only, if given: a change point
    that stands (the tail recompute's anchor), so the windows run from the start, as a
    full recompute's, and the merge from ``first``, which no change point crosses."""
    weak = [i - first for i in split(values, settings) if i > first]
    tail = values[first:]
    points = merge(tail, weak, settings)
    if not (settings.otava_exact or settings.min_segment == 1 or not points):
        points = merge(tail, refine(tail, [p.index for p in points], settings), settings)
    return [ChangePoint(p.index + first, p.before_mean, p.after_mean, p.change_percent,
                        p.pvalue) for p in points]


def _kept_indices(length: int, outliers: Collection[int]) -> NDArray[np.int64]:
    """The indices of ``length`` points that are not marked outliers."""
    keep = np.ones(length, dtype=bool)
    marked = [i for i in outliers if 0 <= i < length]
    keep[marked] = False
    return np.flatnonzero(keep)


def find_change_points(values: Values,
                       settings: ChangePointSettings = DEFAULT_SETTINGS, *,
                       steps: Collection[int] = (),
                       outliers: Collection[int] = ()) -> list[ChangePoint]:
    """The change points of ``values`` (a series, oldest first), honouring the marks."""
    return _find(values, settings, steps, outliers)


def _find(values: Values, settings: ChangePointSettings, steps: Collection[int],
          outliers: Collection[int], first: int = 0) -> list[ChangePoint]:
    """``find_change_points``, after ``first`` only (see ``_detect``)."""
    series = np.asarray(values, dtype=np.float64)
    if series.ndim != 1 or not np.all(np.isfinite(series)):
        raise ValueError("values: a sequence of finite numbers")
    kept = _kept_indices(len(series), outliers)
    cuts = sorted({0, len(kept), *(int(np.searchsorted(kept, s)) for s in steps)})
    after = int(np.searchsorted(kept, first))
    found: list[ChangePoint] = []
    for start, stop in zip(cuts, cuts[1:], strict=False):
        if stop <= after:
            continue
        for point in _detect(series[kept[start:stop]], settings, max(after - start, 0)):
            found.append(ChangePoint(int(kept[start + point.index]), point.before_mean,
                                     point.after_mean, point.change_percent, point.pvalue))
    return found


# An append recomputes the series from its last change point (or step mark) up to this
# many windows back, at least two windows from the end (an "anchor"); without one, this
# many windows of the end.
ANCHOR_WINDOWS = 10
TAIL_WINDOWS = 6


def find_change_points_tail(values: Values, known: Sequence[ChangePoint],
                            settings: ChangePointSettings = DEFAULT_SETTINGS, *,
                            steps: Collection[int] = (),
                            outliers: Collection[int] = ()) -> list[ChangePoint]:
    """What ``find_change_points`` says of ``values`` after points were appended, given
    ``known``, its answer before: the series' end is detected afresh, the change points
    before it are kept. O(window) per append, not O(series): a run's windows away from
    the end are the previous run's and come from ``_known_window``'s cache.

    With an anchor (see ``ANCHOR_WINDOWS``), a change point both runs have, the known
    change points up to it are kept and the fresh ones after it taken; the fresh run's
    windows start on the full recompute's grid a window before it, and its merge at it.
    Without one, nothing is known from
    ``TAIL_WINDOWS`` to two windows from the end; the fresh run starts on the grid there
    and its first window (its edge) is left to the known change points. The last kept
    change point is retested against the segment now after it; should it fail, the whole
    series is recomputed."""
    length = len(values)
    longest, shortest = TAIL_WINDOWS * settings.window, 2 * settings.window
    if length <= longest:
        return find_change_points(values, settings, steps=steps, outliers=outliers)
    grid = settings.window // 2
    boundaries = sorted({p.index for p in known} | set(steps))
    anchors = [b for b in boundaries
               if length - ANCHOR_WINDOWS * settings.window <= b <= length - shortest]
    if anchors:
        origin = _on_grid(max(anchors[-1] - settings.window, 0), length, grid, steps, outliers)
        cut, first = anchors[-1] + 1, anchors[-1] - origin
    else:
        origin = _on_grid(length - longest, length, grid, steps, outliers)
        cut, first = origin + settings.window, 0
    fresh = [ChangePoint(p.index + origin, p.before_mean, p.after_mean, p.change_percent,
                         p.pvalue)
             for p in _find(values[origin:], settings, [s - origin for s in steps if s > origin],
                            [o - origin for o in outliers if o >= origin], first)
             if p.index + origin >= cut]
    kept = [p for p in known if p.index < cut]
    if kept:  # the segment after the last kept change point may have grown
        last = kept[-1].index
        lower = max([b for b in boundaries if b < last], default=0)
        upper = min([s for s in steps if s > last] + [p.index for p in fresh[:1]] + [length])
        kept[-1] = _retest(values, lower, last, upper, outliers)
        if kept[-1].pvalue >= settings.max_pvalue:  # it no longer stands: start over
            return find_change_points(values, settings, steps=steps, outliers=outliers)
    return kept + fresh


def _on_grid(index: int, length: int, grid: int, steps: Collection[int],
             outliers: Collection[int]) -> int:
    """The last start of a full recompute's window at or before ``index``: the windows
    count the points that are not outliers, by ``grid``, from the series' start or the
    last step mark."""
    kept = _kept_indices(length, outliers)
    position = int(np.searchsorted(kept, index, side="right")) - 1
    stretch = max([c for c in (int(np.searchsorted(kept, s)) for s in steps) if c <= position],
                  default=0)
    return int(kept[stretch + (max(position, stretch) - stretch) // grid * grid])


def _retest(values: Values, start: int, split: int, stop: int,
            outliers: Collection[int]) -> ChangePoint:
    """The change point at ``split`` tested between [start, split) and [split, stop)."""
    series = np.asarray(values[start:stop], dtype=np.float64)
    kept = _kept_indices(len(series), [o - start for o in outliers])
    prefix = Prefix(series[kept])
    before, after, p = t_test(prefix, 0, int(np.searchsorted(kept, split - start)), len(kept))
    return ChangePoint(split, before, after, _change_percent(before, after), p)
