"""What bounds a case, in words (ingest.bounds), against the figures worked out here."""

from __future__ import annotations

from ingest.bounds import Bound, bound_sentence, bound_short


def test_the_issue_sentence() -> None:
    # 4.0 x the mean rows: the other ranks wait 1 - 1/4 = 75 % of the time.
    b = Bound("compute", compute=62.4, hbm=8.8, nvlink=15.1, hot_rank_factor=4.0)
    assert bound_sentence(b) == ("compute-bound on the busiest rank (62 %, 4.0× the mean "
                                 "rows); the other ranks wait 75 % of the time")


def test_below_sixty_percent_is_the_nearest_roof() -> None:
    # 8 x the mean: 1 - 1/8 = 87.5 %, printed 88.
    b = Bound("nvlink", compute=26.3, hbm=16.8, nvlink=42.4, hot_rank_factor=8.0)
    assert bound_sentence(b) == ("nearest roof NVLink on the busiest rank (42 %, 8.0× the "
                                 "mean rows), none reached; the other ranks wait 88 % of the "
                                 "time")


def test_balanced_ranks_name_no_busiest_rank() -> None:
    b = Bound("hbm", compute=45.6, hbm=58.8, nvlink=23.7, hot_rank_factor=1.0)
    assert bound_sentence(b) == "nearest roof HBM (59 %), none reached; the ranks are balanced"
    b = Bound("hbm", compute=45.6, hbm=71.0, nvlink=23.7, hot_rank_factor=1.0)
    assert bound_sentence(b) == "HBM-bound (71 %); the ranks are balanced"


def test_latency_and_unknown() -> None:
    b = Bound("latency", compute=14.6, hbm=18.8, nvlink=17.3, hot_rank_factor=2.0)
    assert bound_sentence(b) == ("latency-bound: no roof reaches 25 % on the busiest rank "
                                 "(nearest roof HBM, 19 %, 2.0× the mean rows); the other "
                                 "ranks wait 50 % of the time")
    assert bound_sentence(Bound(None, None, None, None, None)).startswith("no roof known")


def test_the_short_form_for_a_table_cell() -> None:
    # The sentences above, in a cell's words: the roof, its share, how much hotter.
    assert bound_short(Bound("compute", 62.4, 8.8, 15.1, 4.0)) == "compute 62 %, 4.0× rows"
    assert bound_short(Bound("nvlink", 26.3, 16.8, 42.4, 8.0)) == "near NVLink 42 %, 8.0× rows"
    assert bound_short(Bound("hbm", 45.6, 71.0, 23.7, 1.0)) == "HBM 71 %"
    assert bound_short(Bound("latency", 14.6, 18.8, 17.3, 2.0)) == "latency (HBM 19 %), 2.0× rows"
    assert bound_short(Bound(None, None, None, None, None)) == ""
