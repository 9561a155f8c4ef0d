"""Caveats you can read and find: a badge's meaning on hover and its link, and the list of
the cases that carry each code, on the reference's cases."""

from __future__ import annotations

from typing import Any

from dash import dcc, html
from test_figures import view_cases
from views import views

from app.dashboard.caveat_list import caveat_list
from app.dashboard.components import caveat_badges
from ingest.derived import CAVEAT_CODES, CAVEAT_MEANINGS


def test_every_code_has_a_meaning() -> None:
    assert set(CAVEAT_MEANINGS) == set(CAVEAT_CODES)


def test_badges_say_what_they_mean_and_link_to_their_cases() -> None:
    badges = caveat_badges({"hot_rank": 28, "noisy_windows": 16}).children
    assert [b.children for b in badges] == ["hot_rank: 28", "noisy_windows: 16"]
    assert [b.href for b in badges] == ["#report-caveat-hot_rank", "#report-caveat-noisy_windows"]
    assert "understates" in badges[0].title and "spread over 5 %" in badges[1].title


def test_the_list_names_each_case_carrying_a_code(reference: dict[str, Any]) -> None:
    cases = view_cases(reference)
    groups = {g.id: g for g in caveat_list(7, views(cases))}
    assert list(groups) == ["report-caveat-noisy_windows", "report-caveat-hot_rank"]
    hot = groups["report-caveat-hot_rank"].children[1].children
    # Imbalance 4 and 8: rank 0 receives 4 and 8 x the mean rows.
    want = [c["id"] for c in reference["cases"] if c["imbalance"] in (4, 8)]
    assert [link.children for link in hot] == want and len(want) == 28
    assert all(isinstance(link, dcc.Link) and link.href.startswith("/reports/7/cases/")
               for link in hot)
    assert "by 8.0 x" in next(link.title for link in hot if link.children.endswith("-i8"))
    assert isinstance(caveat_list(7, [])[0], html.Div)


def test_a_long_list_links_the_first_cases_and_counts_the_rest(
        reference: dict[str, Any]) -> None:
    noisy = [dict(c, id=f"case-{i}", caveats=[{"code": "noisy_windows", "message": "m"}])
             for i, c in enumerate(reference["cases"] * 3)]  # 189 cases
    group = caveat_list(7, views(noisy))[0]
    heading, linked, more = group.children
    assert "189 cases" in heading.children[1]
    assert [link.children for link in linked.children] == [f"case-{i}" for i in range(100)]
    assert more.children == ("... and 89 more: the case table's caveats column filters on "
                             "noisy_windows")
