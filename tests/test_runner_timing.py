"""Timing methodology on the CPU: warm-up by time (and by count, whichever is longer), the
warm-up count agreed over two gloo ranks, the L2 flush outside the timed region, and the
``[timing]`` keys of the matrix file."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from gloo_ranks import GlooRanks

from runner.matrix import MatrixError, Timing, parse_matrix
from runner.timing import time_windows, warm_up

CPU = torch.device("cpu")


def _sleeper(seconds: float, calls: list[str], name: str = "run") -> Callable[[], None]:
    def run() -> None:
        calls.append(name)
        time.sleep(seconds)

    return run


def test_warm_up_lasts_warmup_ms_when_the_count_is_shorter() -> None:
    calls: list[str] = []
    start = time.perf_counter()
    count = warm_up(_sleeper(0.005, calls), None, Timing(warmup=2, warmup_ms=60), CPU, None)
    elapsed_ms = (time.perf_counter() - start) * 1e3
    assert count == len(calls)
    # 60 ms of 5 ms iterations: at least 12 (sleep only oversleeps, so never many more).
    assert elapsed_ms >= 60
    assert 2 < count <= 12


def test_warm_up_runs_the_count_when_it_is_longer() -> None:
    calls: list[str] = []
    count = warm_up(_sleeper(0.002, calls), None, Timing(warmup=15, warmup_ms=5), CPU, None)
    assert count == len(calls) == 15  # 15 x 2 ms is past 5 ms already


def test_warm_up_at_least_one_iteration() -> None:
    calls: list[str] = []
    assert warm_up(_sleeper(0.0, calls), None, Timing(warmup=0, warmup_ms=0), CPU, None) == 1


def test_flush_runs_before_each_timed_iteration_and_is_not_timed() -> None:
    calls: list[str] = []
    timing = Timing(windows=2, iterations=3, warmup=1, warmup_ms=0)
    windows = time_windows(_sleeper(0.002, calls), timing, device=CPU, group=None,
                           flush=_sleeper(0.03, calls, "flush"))
    timed = calls[1:]  # after the one warm-up iteration
    assert timed == ["flush", "run"] * 6
    assert len(windows.per_window_ms) == 2
    # A run is >= 2 ms; a flush inside the timed region would add >= 30 ms to each.
    assert all(2 <= ms < 20 for ms in windows.per_window_ms), windows.per_window_ms


def _rank(rank: int, out: Path) -> None:
    calls: list[str] = []
    group = dist.group.WORLD

    def run() -> None:
        calls.append("run")
        time.sleep(0.001 if rank == 0 else 0.01)  # rank 1 is ten times slower

    count = warm_up(run, None, Timing(warmup=1, warmup_ms=100), CPU, group)
    (out / f"rank{rank}.json").write_text(json.dumps([count, len(calls)]))


def test_ranks_agree_on_the_warm_up_count(tmp_path: Path, gloo_pair: GlooRanks) -> None:
    gloo_pair.run(_rank, tmp_path)
    (c0, n0), (c1, n1) = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    # Equal counts (an iteration of the layer holds collectives: unequal counts would
    # leave a rank waiting). Rank 1's >= 10 ms iterations reach 100 ms within 10; rank 0's
    # ~1 ms ones need ~100, and the agreed count is the larger.
    assert c0 == n0 == c1 == n1
    assert c0 > 30


SHAPE = "[shape]\nT = 8\nD = 32\nE = 2\nK = 1\n"
CASES = {"mode": ["inference", "training"], "ep": 1, "precision": "bf16",
         "pipeline": "standard", "F": 32, "imbalance": 1, "category": "t"}


def _matrix(timing: dict[str, object]) -> Timing:
    return parse_matrix({"shape": {"T": 8, "D": 32, "E": 2, "K": 1}, "matrix": CASES,
                         "timing": timing}).timing


def test_timing_defaults_flush_inference_only() -> None:
    t = _matrix({})
    assert (t.warmup_ms, t.flush_l2) == (200.0, None)
    assert t.flushes(training=False) and not t.flushes(training=True)
    on, off = _matrix({"flush_l2": True}), _matrix({"flush_l2": False, "warmup_ms": 0})
    assert on.flushes(training=True) and on.flushes(training=False)
    assert not off.flushes(training=False) and off.warmup_ms == 0.0


@pytest.mark.parametrize(("timing", "message"), [
    ({"flush_l2": 1}, "timing.flush_l2: must be true or false, got 1"),
    ({"warmup_ms": -5}, "timing.warmup_ms: must be a finite number >= 0, got -5"),
    ({"warmup_ms": "long"}, "timing.warmup_ms: must be a number, got 'long'"),
    ({"warmup_s": 1}, "timing.warmup_s: unknown key (expected windows, iterations, warmup, "
                      "warmup_ms, flush_l2"),
])
def test_bad_timing_keys_are_named(timing: dict[str, object], message: str) -> None:
    with pytest.raises(MatrixError) as err:
        _matrix(timing)
    assert str(err.value).startswith(message)


def test_every_iteration_is_kept_and_the_windows_are_their_means() -> None:
    calls: list[str] = []
    # iteration i of the 2 x 4 timed ones sleeps 1 ms, every fourth one 12 ms
    plan = [0.001, 0.001, 0.001, 0.012] * 2

    def run() -> None:
        calls.append("run")
        if len(calls) > 1:  # after the one warm-up iteration
            time.sleep(plan[len(calls) - 2])

    timing = Timing(windows=2, iterations=4, warmup=1, warmup_ms=0)
    windows = time_windows(run, timing, device=CPU, group=None)
    per = windows.per_iteration_ms
    assert len(per) == 8
    assert all(ms >= planned * 1e3 for ms, planned in zip(per, plan, strict=True))
    assert per[3] > max(per[:3]) and per[7] > max(per[4:7])
    assert windows.per_window_ms == pytest.approx([sum(per[:4]) / 4, sum(per[4:]) / 4])


def test_iteration_percentiles_are_numpys() -> None:
    import numpy as np

    from runner.report import iteration_percentiles

    rng = np.random.default_rng(3)
    times = [float(t) for t in rng.gamma(2.0, 0.5, size=317) + 1.0]
    got = iteration_percentiles(times)
    want = np.percentile(np.array(times), [50, 90, 99])  # numpy's linear interpolation
    assert [got["p50"], got["p90"], got["p99"]] == pytest.approx(list(want), rel=1e-12)
    assert iteration_percentiles([2.5]) == {"p50": 2.5, "p90": 2.5, "p99": 2.5}
    # p99 of 317 values sits at rank 0.99 x 316 = 312.84 of the sorted ones
    ranked = sorted(times)
    assert got["p99"] == pytest.approx(ranked[312] + 0.84 * (ranked[313] - ranked[312]))


SLOW_ITERATION = 2  # rank 1's third timed iteration takes 15 ms, rank 0's never do


def _iteration_rank(rank: int, out: Path) -> None:
    calls: list[str] = []

    def run() -> None:
        calls.append("run")
        timed = len(calls) - 2  # one warm-up iteration first
        time.sleep(0.015 if rank == 1 and timed == SLOW_ITERATION else 0.001)

    timing = Timing(windows=2, iterations=3, warmup=1, warmup_ms=0)
    windows = time_windows(run, timing, device=CPU, group=dist.group.WORLD)
    (out / f"rank{rank}.json").write_text(json.dumps(windows.per_iteration_ms))


def test_each_iteration_is_the_slowest_ranks(tmp_path: Path, gloo_pair: GlooRanks) -> None:
    gloo_pair.run(_iteration_rank, tmp_path)
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0 == r1 and len(r0) == 6  # the same maxima on both ranks
    assert r0[SLOW_ITERATION] >= 15
    assert all(ms < 15 for i, ms in enumerate(r0) if i != SLOW_ITERATION)
