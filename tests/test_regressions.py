"""Regression detection (``ingest.regressions``) on hand-made series and on synthetic
series built from the reference report with seeded noise within each case's windows."""

from __future__ import annotations

import random
from typing import Any

import pytest
from history_helpers import spread_percent, synthetic_series

from ingest.regressions import Point, Settings, Verdict, judge, judge_series
from ingest.series import series_context, series_fields

Body = dict[str, Any]


def test_verdict_matches_hand_arithmetic() -> None:
    history = [Point(10.0, 1.0), Point(10.2, 1.0), Point(9.8, 1.0), Point(10.1, 1.0),
               Point(9.9, 1.0)]
    # median 10.0; |deviations| 0, .2, .2, .1, .1 -> MAD 0.1;
    # noise = 3.5 * 1.4826 * 0.1 / 10 * 100 = 5.1891 % (above both window spreads, 1 and 2 %).
    verdict = judge(history, Point(11.0, 2.0))
    assert verdict.status == "regression"
    assert verdict.baseline == 10.0 and verdict.baseline_points == 5
    assert verdict.change_percent == pytest.approx(10.0)
    assert verdict.noise_percent == pytest.approx(3.5 * 1.4826 * 0.1 / 10 * 100)
    # 5.1 % slower: past the 5 % threshold but within the history's own scatter.
    assert judge(history, Point(10.51, 2.0)).status == "unchanged"
    assert judge(history, Point(8.9, 2.0)).status == "improvement"


def test_own_window_spread_explains_a_change() -> None:
    steady = [Point(10.0, 0.5)] * 5  # MAD 0: only the window spreads bound the noise
    assert judge(steady, Point(10.8, 0.5)).status == "regression"
    assert judge(steady, Point(10.8, 9.0)).status == "unchanged"   # its own windows vary 9 %
    assert judge([Point(10.0, 9.0)] * 5, Point(10.8, 0.5)).status == "unchanged"


def test_threshold_is_a_floor() -> None:
    steady = [Point(10.0, 0.1)] * 5
    assert judge(steady, Point(10.4, 0.1)).status == "unchanged"
    assert judge(steady, Point(10.4, 0.1), Settings(threshold_percent=3)).status == "regression"


@pytest.mark.parametrize("earlier", [0, 1, 2])
def test_fewer_than_three_earlier_points_is_said_not_judged(earlier: int) -> None:
    verdict = judge([Point(10.0, 0.1)] * earlier, Point(20.0, 0.1))
    assert verdict == Verdict("insufficient_history", baseline_points=earlier)
    assert not verdict.flagged


def test_only_the_recent_window_is_the_baseline() -> None:
    # 30 old points at 10 ms, then the series settled at 12 ms for 20 points.
    history = [Point(10.0, 0.1)] * 30 + [Point(12.0, 0.1)] * 20
    assert judge(history, Point(12.0, 0.1)).status == "unchanged"
    assert judge(history, Point(12.0, 0.1), Settings(window=50)).status == "regression"


def _verdicts(reports: list[Body]) -> dict[str, Verdict]:
    """Each case of the newest report judged against the same case in the earlier ones."""
    points: dict[str, list[Point]] = {}
    for report in reports:
        for case in report["cases"]:
            points.setdefault(case["id"], []).append(Point(case["layerMS"], spread_percent(case)))
    return {case_id: judge(series[:-1], series[-1]) for case_id, series in points.items()}


@pytest.mark.parametrize("seed", range(5))
def test_noise_within_window_spread_flags_nothing(reference: Body, seed: int) -> None:
    verdicts = _verdicts(synthetic_series(reference, 11, seed=seed))
    assert len(verdicts) == 63
    assert [c for c, v in verdicts.items() if v.flagged] == []
    assert {v.baseline_points for v in verdicts.values()} == {10}


@pytest.mark.parametrize("seed", range(5))
def test_exactly_the_moved_cases_are_flagged(reference: Body, seed: int) -> None:
    ids = [c["id"] for c in reference["cases"]]
    # Window spreads 3.4, 5.0, 5.4 and 3.6 %: ordinary cases, neither the quietest nor
    # the noisiest (at 9.8 % spread a 15 % step is partly hidden by the case's own noise).
    slowed, sped = [ids[0], ids[20], ids[45]], ids[36]
    noisy = ids[6]
    reports = synthetic_series(
        reference, 11, seed=seed,
        newest_factor={**dict.fromkeys(slowed, 1.15), sped: 0.88, noisy: 1.08},
        window_spread={noisy: 20.0},
    )
    assert spread_percent(reports[-1]["cases"][6]) == pytest.approx(20.0)
    verdicts = _verdicts(reports)
    flagged = {c: v.status for c, v in verdicts.items() if v.flagged}
    assert flagged == {**dict.fromkeys(slowed, "regression"), sped: "improvement"}
    for case_id in slowed:
        # The noise moves each point by at most half its spread (<= 2.7 %) either way.
        assert 15 - 6 < (verdicts[case_id].change_percent or 0) < 15 + 6
    assert verdicts[noisy].status == "unchanged"
    assert verdicts[noisy].noise_percent is not None and verdicts[noisy].noise_percent >= 20


def test_a_noisy_case_is_still_flagged_past_its_noise(reference: Body) -> None:
    noisy = reference["cases"][6]["id"]
    reports = synthetic_series(reference, 11, newest_factor={noisy: 1.35},
                               window_spread={noisy: 20.0})
    assert _verdicts(reports)[noisy].status == "regression"


def test_series_identity_is_gpu_and_shape(reference: Body) -> None:
    meta = reference["meta"]
    assert series_fields(meta) == {"gpu": "NVIDIA Blackwell Ultra / GB300 NVL72",
                                   "T": 2048, "D": 7168, "E": 384, "K": 6}
    same = {**meta, "date": "2027-01-01", "source": "elsewhere",
            "shape": {**meta["shape"], "defaultF": 1536}}
    assert series_context(same) == series_context(meta)
    for changed in ({**meta, "gpu": "NVIDIA H200"}, {**meta, "shape": {**meta["shape"], "K": 8}}):
        assert series_context(changed) != series_context(meta)


def _quadratic_verdicts(
    points: list[Point], window: int, threshold: float, z: float, steps: set[int],
    outliers: set[int],
) -> list[tuple[str, int, float | None, float | None, float | None]]:
    """The rule the series was judged by before the sliding window, written out again: each
    point against a fresh copy of every baseline point before it (after the last step at or
    before it, outliers left out), the last ``window`` of them."""
    out = []
    for i, newest in enumerate(points):
        start = max((s for s in steps if s <= i), default=0)
        before = [p for j, p in enumerate(points[:i]) if j >= start and j not in outliers]
        recent = before[-window:]
        if len(recent) < 3:
            out.append(("insufficient_history", len(recent), None, None, None))
            continue
        times = sorted(p.layer_ms for p in recent)
        mid = len(times) // 2
        base = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
        deviations = sorted(abs(p.layer_ms - base) for p in recent)
        mad = (deviations[mid] if len(deviations) % 2
               else (deviations[mid - 1] + deviations[mid]) / 2)
        spreads = sorted(p.window_spread_percent for p in recent
                         if p.window_spread_percent is not None)
        k = len(spreads) // 2
        median_spread = (0.0 if not spreads else spreads[k] if len(spreads) % 2
                         else (spreads[k - 1] + spreads[k]) / 2)
        noise = max(z * 1.4826 * mad / base * 100, newest.window_spread_percent or 0.0,
                    median_spread)
        change = (newest.layer_ms - base) / base * 100
        status = "unchanged"
        if abs(change) > threshold and abs(change) > noise:
            status = "regression" if change > 0 else "improvement"
        out.append((status, len(recent), base, change, noise))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_linear_judge_gives_the_quadratic_rules_verdicts(seed: int) -> None:
    rng = random.Random(seed)
    level = 1.0
    points = []
    for _ in range(400):
        if rng.random() < 0.02:
            level *= rng.choice([0.8, 1.25])  # a real step now and then
        spread = None if rng.random() < 0.1 else rng.uniform(0.2, 6.0)
        points.append(Point(level * (1 + rng.gauss(0, 0.03)), spread))
    steps = set(rng.sample(range(400), 5))
    outliers = set(rng.sample(range(400), 12))
    window = rng.choice([3, 4, 7, 20])
    settings = Settings(window=window)
    got = [(v.status, v.baseline_points, v.baseline, v.change_percent, v.noise_percent)
           for v in judge_series(points, settings, steps=steps, outliers=outliers)]
    want = _quadratic_verdicts(points, window, 5.0, 3.5, steps, outliers)
    assert [g[:2] for g in got] == [w[:2] for w in want]
    for g, w in zip(got, want, strict=True):
        for a, b in zip(g[2:], w[2:], strict=True):
            assert (a is None and b is None) or a == pytest.approx(b, rel=1e-12)
    assert 0 < sum(g[0] == "regression" for g in got) < 400  # the series exercises verdicts
    # Judging from an index gives the same verdicts for the points from it on.
    tail = judge_series(points, settings, steps=steps, outliers=outliers, first=350)
    assert [(v.status, v.baseline) for v in tail] == [(g[0], g[2]) for g in got[350:]]
