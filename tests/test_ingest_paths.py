"""The ingest and case-listing paths made faster for bench/ingest_reads.py keep their answers:
caveats land on their own case (also when appended), page totals are right without the
count query, and the fast tree check flags exactly what the slow walk names."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.case_fields import CaseFilter
from app.core.errors import NotFound
from app.models import CaseRow, CaveatRow
from app.repository import cases as cases_repo
from app.services import reports as report_service
from ingest.derived import HOT_RANK_FACTOR, NOISY_WINDOW_SPREAD_PERCENT, caveats, derive
from ingest.validate import MAX_DEPTH, tree_problems, validate_case_list, validate_report


def _store(session: Session, raw: dict[str, Any]) -> int:
    result = report_service.ingest_report(session, raw, validate_report(raw))
    session.commit()
    return result.id


def _stored_caveats(session: Session, report_id: int) -> dict[str, list[str]]:
    rows = session.execute(
        select(CaseRow.case_id, CaveatRow.code)
        .join(CaveatRow, CaveatRow.case_pk == CaseRow.id)
        .where(CaseRow.report_id == report_id).order_by(CaveatRow.id)
    ).all()
    out: dict[str, list[str]] = {}
    for case_id, code in rows:
        out.setdefault(case_id, []).append(code)
    return out


def _expected_caveats(raw: dict[str, Any]) -> dict[str, list[str]]:
    report = validate_report(raw)
    out = {}
    for case in report.cases:
        codes = [c.code for c in caveats(report.meta, case, derive(report.meta, case))]
        if codes:
            out[case.id] = codes
    return out


def _by_hand(raw: dict[str, Any]) -> dict[str, list[str]]:
    """The caveats docs/metrics.md defines on what these cases carry, worked out here from
    the JSON (apart from ingest.derived), in its order; the thresholds are ingest's."""
    out = {}
    for case in raw["cases"]:
        rows, windows = case["receiveRows"], sorted(case["windows"]["combined"])
        median = (windows[(len(windows) - 1) // 2] + windows[len(windows) // 2]) / 2
        peak = raw["meta"]["theoreticalTFPerGPU"][case["precision"]]
        codes = [code for code, holds in (
            ("numerical_not_accepted", case["numericalAccepted"] is False),
            ("oom", case["ooms"] > 0),
            ("allocation_retries", case["allocationRetries"] > 0),
            ("noisy_windows",
             (windows[-1] - windows[0]) / median * 100 > NOISY_WINDOW_SPREAD_PERCENT),
            ("hot_rank", max(rows) / (sum(rows) / len(rows)) >= HOT_RANK_FACTOR),
            ("above_peak", case["usefulTFPerGPU"] > peak),
        ) if holds]
        if codes:
            out[case["id"]] = codes
    return out


def test_caveats_land_on_their_own_case(session: Session, reference: dict[str, Any]) -> None:
    # Three cases made wrong in three ways, each on its own case beside the reference's own
    # hot_rank and noisy_windows.
    cases = reference["cases"]
    cases[3]["ooms"] = 2
    cases[20]["numericalAccepted"] = False
    cases[41]["usefulTFPerGPU"] = 1.5 * reference["meta"]["theoreticalTFPerGPU"][
        cases[41]["precision"]]
    expected = _by_hand(reference)
    assert {c for codes in expected.values() for c in codes} == {
        "oom", "numerical_not_accepted", "above_peak", "hot_rank", "noisy_windows"}
    assert sum("hot_rank" in codes for codes in expected.values()) == 28
    report_id = _store(session, reference)
    assert _stored_caveats(session, report_id) == expected


def test_appended_cases_get_their_caveats_and_next_positions(
    session: Session, reference: dict[str, Any]
) -> None:
    first, rest = reference["cases"][:40], reference["cases"][40:]
    report_id = _store(session, {**reference, "cases": first})
    body = {"cases": copy.deepcopy(rest)}
    result = report_service.append_cases(
        session, report_id, body["cases"], validate_case_list(body).cases
    )
    session.commit()
    assert (result.added, result.case_count) == (len(rest), 63)
    assert _stored_caveats(session, report_id) == _expected_caveats(reference)
    positions = session.execute(
        select(CaseRow.case_id, CaseRow.position).where(CaseRow.report_id == report_id)
    ).all()
    assert sorted(positions, key=lambda p: p[1]) == [
        (c["id"], i) for i, c in enumerate(reference["cases"])
    ]


@pytest.mark.parametrize(
    ("limit", "offset", "filters", "expected_len", "expected_total"),
    [
        (1000, 0, {}, 63, 63),  # short page: no count query
        (63, 0, {}, 63, 63),  # full page: counted
        (10, 0, {}, 10, 63),
        (10, 60, {}, 3, 63),  # short page after an offset
        (10, 63, {}, 0, 63),  # past the end
        (10, 500, {}, 0, 63),
        (1000, 0, {"ep": [999]}, 0, 0),  # filtered to nothing
    ],
)
def test_case_page_totals(
    session: Session, reference: dict[str, Any], limit: int, offset: int,
    filters: dict[str, Any], expected_len: int, expected_total: int,
) -> None:
    report_id = _store(session, reference)
    rows, total = cases_repo.list_cases(
        session, report_id, filters=CaseFilter(**filters), limit=limit,
        offset=offset,
    )
    assert (len(rows), total) == (expected_len, expected_total)
    if not filters:
        assert [r.case_id for r in rows] == [
            c["id"] for c in reference["cases"][offset:offset + limit]
        ]


def test_case_page_of_a_missing_report_is_404(session: Session) -> None:
    with pytest.raises(NotFound):
        cases_repo.list_cases(session, 424242)
    with pytest.raises(NotFound):
        cases_repo.list_cases(session, 424242, offset=10)


def _nest(depth: int, leaf: Any) -> Any:
    node = leaf
    for i in range(depth):
        node = [node] if i % 2 else {"k": node}
    return node


@pytest.mark.parametrize("leaf", [1.5, "x", [], {}, [1], {"a": None}])
@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2])
def test_tree_depth_limit(depth: int, leaf: Any) -> None:
    problems = list(tree_problems(_nest(depth, leaf)))
    leaf_depth = depth + (1 if leaf in ([1], {"a": None}) else 0)
    assert bool(problems) == (leaf_depth > MAX_DEPTH)
    assert all(p.type == "json_too_deep" for p in problems)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (float("inf"), "finite_number"),
        ("a\x00b", "string_nul"),
        ("\ud800", "string_surrogate"),
        ("é\x00", "string_nul"),
    ],
)
def test_tree_problems_found_deep_in_a_clean_report(
    reference: dict[str, Any], value: Any, kind: str
) -> None:
    assert list(tree_problems(reference)) == []
    reference["cases"][41]["windows"]["combined"][2] = value
    problems = list(tree_problems(reference))
    assert [(p.path, p.type) for p in problems] == [("cases[41].windows.combined[2]", kind)]
    reference["cases"][41]["windows"]["combined"][2] = 1.0
    reference["meta"]["shape"][value if isinstance(value, str) else "x"] = 1
    assert bool(list(tree_problems(reference))) == isinstance(value, str)


def test_content_hashes_are_the_hashes_of_canonical_json(reference: dict[str, Any]) -> None:
    """The report's hash built from its cases' encodings is the hash of the whole report
    encoded at once (keys sorted, no spaces), also with keys that sort around "cases" and
    text outside ASCII; and each case's is its own."""
    raw = copy.deepcopy(reference)
    raw["aaa"] = {"z": 1, "b": [1.5, None, True]}
    raw["zzz"] = "Grüße, 東京"
    raw["cases"][0]["note"] = "ümlaut ✓"

    def sha(value: Any) -> str:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    whole, cases = report_service.content_hashes(raw)
    assert whole == sha(raw)
    assert cases == [sha(case) for case in raw["cases"]]
    assert len(set(cases)) == len(raw["cases"])
