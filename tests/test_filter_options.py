"""Filters that know the data, on the reference's cases as stored: counts under the other
filters (the repository's query, checked against counts made here from the served cases),
disabled options, the empty view's hint and the URL's bad values; on SQLite and Postgres."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from history_helpers import ingest
from sqlalchemy.orm import Session

from app.case_fields import FILTERABLE, CaseFilter
from app.repository import cases as cases_repo
from app.services import cases as case_service
from app.services.filter_choices import all_options, empty_hint, known_filters, url_problems

Body = dict[str, Any]
FACETS: dict[str, list[Any]] = {
    "mode": ["inference", "training"], "ep": [8, 16, 32, 64],
    "precision": ["bf16", "mxfp8", "nvfp4"], "pipeline": ["mega", "staged", "standard"],
    "category": ["single_layer", "width"], "F": [1536, 3072, 6144],
    "imbalance": [1.0, 4.0, 8.0], "limiter": [],
}


@pytest.fixture
def stored(session: Session, reference: Body) -> int:
    return ingest(session, reference)


def test_training_offers_no_ep8_and_no_nvfp4(session: Session, stored: int) -> None:
    training = CaseFilter(mode=["training"])
    counts = cases_repo.option_counts(session, stored, training)
    # Training ran at EP 32 and 64 only, in bf16 and mxfp8: counted from the cases here.
    assert counts["ep"] == {32: 9, 64: 18}
    assert counts["precision"] == {"bf16": 9, "mxfp8": 18}
    # The field's own filter is left out: both modes stay choosable with their counts.
    assert counts["mode"] == {"inference": 36, "training": 27}
    ep = {o["value"]: o for o in all_options(FACETS, counts, training)["ep"]}
    assert ep["8"] == {"label": "8 (0)", "value": "8", "disabled": True}
    assert ep["32"] == {"label": "32 (9)", "value": "32", "disabled": False}
    # A chosen value stays enabled at 0, so it can be removed.
    both = CaseFilter(mode=["training"], ep=[8])
    both_counts = cases_repo.option_counts(session, stored, both)
    assert not {o["value"]: o
                for o in all_options(FACETS, both_counts, both)["ep"]}["8"]["disabled"]


def test_counts_under_several_filters(session: Session, stored: int) -> None:
    cases = case_service.view_cases(session, stored)  # with the derived limiter
    counts = cases_repo.option_counts(session, stored,
                                      CaseFilter(mode=["training"], precision=["bf16"]))
    # Training in bf16: one variant (standard) of 3 configurations at EP 32, 6 at EP 64.
    assert counts["ep"] == {32: 3, 64: 6}
    assert counts["precision"] == {"bf16": 9, "mxfp8": 18}  # training, any precision
    assert counts["mode"] == {"inference": 9, "training": 9}  # bf16, either mode
    # Each field's counts as defined: the cases passing every other field's filter.
    for chosen in (CaseFilter(ep=[8, 64], imbalance=[1.0, 8.0], pipeline=["mega"]),
                   CaseFilter(precision=["nvfp4"], mode=["training"]),
                   CaseFilter(limiter=["compute"], F=[3072]), CaseFilter()):
        counts = cases_repo.option_counts(session, stored, chosen)
        for field in FILTERABLE:
            others = [(f.wire, v) for f, v in chosen.active() if f.wire != field.wire]
            assert counts[field.wire] == Counter(
                c.get(field.wire) for c in cases if all(c.get(w) in v for w, v in others)
            ), (chosen, field.wire)


def test_an_empty_view_names_the_filter_to_relax(session: Session, stored: int) -> None:
    def hint_for(chosen: CaseFilter) -> str:
        return empty_hint(cases_repo.option_counts(session, stored, chosen), chosen)

    assert hint_for(CaseFilter(mode=["training"])) == ""
    hint = hint_for(CaseFilter(mode=["training"], precision=["nvfp4"]))
    # Without mode: the 9 nvfp4 cases; without precision: the 27 training ones.
    assert hint == ("No case matches these filters. Relax mode (training): 9 cases without "
                    "it; precision (nvfp4): 27 cases without it.")


def test_bad_url_values_are_named_with_the_values_that_exist() -> None:
    problems = url_problems({"precision": "NVFP4", "ep": ["banana", "8"], "F": "3072"}, FACETS)
    assert problems == [
        "ep='banana' is not a whole number: ignored. This report has ep = 8, 16, 32, 64.",
        "precision='NVFP4' matches no case of this report: ignored. It has precision = "
        "bf16, mxfp8, nvfp4.",
    ]
    chosen = known_filters(CaseFilter(precision=["NVFP4", "bf16"], ep=[8, 12]), FACETS)
    assert chosen == CaseFilter(precision=["bf16"], ep=[8])
