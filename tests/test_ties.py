"""The noise-aware best (ingest.ties) against arithmetic written here."""

from __future__ import annotations

from ingest.ties import Scored, best_of, may_be_best, tied


def test_tie_is_the_gap_over_the_larger_value_against_the_larger_noise() -> None:
    # 100 vs 99.4: gap 0.6 / 100 = 0.6 %; a 0.5 % and a 0.7 % spread -> 0.7 % >= 0.6 %: tied.
    assert tied(Scored(100.0, 0.5), Scored(99.4, 0.7))
    # the same gap against spreads of 0.5 % and 0.4 %: 0.6 % > 0.5 %: not tied.
    assert not tied(Scored(100.0, 0.5), Scored(99.4, 0.4))
    # unknown noise counts as none: only equal values tie.
    assert not tied(Scored(10.0), Scored(9.99))
    assert tied(Scored(10.0), Scored(10.0))


def test_best_keeps_every_cell_within_noise_of_it_in_order() -> None:
    cells = [Scored(95.0, 1.0), None, Scored(100.0, 1.0), Scored(99.2, 0.5), Scored(98.0, 1.0)]
    best = best_of(cells, "higher")
    assert best is not None
    # 95: 5 % > 1 %; 99.2: 0.8 % <= 1 %; 98: 2 % > 1 %.
    assert (best.index, best.ties, best.tied) == (2, (2, 3), True)


def test_lower_is_better_picks_the_smallest() -> None:
    best = best_of([Scored(2.0, 0.0), Scored(1.5, 0.0), Scored(1.6, 10.0)], "lower")
    assert best is not None
    # 1.6 vs 1.5: 0.1 / 1.6 = 6.25 % <= 10 %.
    assert (best.index, best.ties) == (1, (1, 2))


def test_a_data_error_is_never_best() -> None:
    cells = [Scored(4500.0, 0.1, frozenset({"above_peak"})), Scored(900.0, 0.1),
             Scored(950.0, 0.1, frozenset({"numerical_not_accepted"})),
             Scored(1e9, 0.1, frozenset({"failed", "oom"}))]
    best = best_of(cells, "higher")
    assert best is not None and (best.index, best.ties) == (1, (1,))
    assert not may_be_best({"failed"}) and may_be_best({"hot_rank", "noisy_windows"})


def test_too_few_eligible_results_name_no_best() -> None:
    assert best_of([Scored(1.0), None], "higher", at_least=2) is None
    assert best_of([Scored(1.0, 0.0, frozenset({"above_peak"})), Scored(2.0)], "higher",
                   at_least=2) is None
    assert best_of([], "higher") is None
