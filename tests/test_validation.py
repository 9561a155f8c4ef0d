"""Every bad input gets its status, the shared error shape naming each field and reason,
and stores nothing: for POST /reports and POST /reports/{id}/cases, on both databases.
Then ``ingest.validate`` on its own, without a server."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from api_helpers import REPORTS, error_detail, problems, row_counts, small_report
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from ingest.validate import (
    MAX_DEPTH,
    InvalidPayload,
    Problem,
    format_path,
    parse_json,
    tree_problems,
    validate_case_list,
    validate_report,
)

Auth = Callable[[str], dict[str, str]]
Body = dict[str, Any]


def _set(path: str, value: Any) -> Callable[[Body], Any]:
    """A mutation that sets a dotted path ('cases.3.layerMS') to ``value``."""

    def mutate(body: Body) -> Any:
        *parents, last = path.split(".")
        node: Any = body
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
        return body

    return mutate


def _delete(path: str) -> Callable[[Body], Any]:
    def mutate(body: Body) -> Any:
        *parents, last = path.split(".")
        node: Any = body
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        del node[last]
        return body

    return mutate


def _raw(before: str, after: str) -> Callable[[Body], Any]:
    """Edit the JSON text itself (for what json.dumps cannot write: NaN in a known
    place, 1e999, malformed text). Replaces the first occurrence only."""

    def mutate(body: Body) -> bytes:
        text = json.dumps(body)
        assert before in text, before
        return text.replace(before, after, 1).encode()

    return mutate


def _duplicate_id(body: Body) -> Body:
    body["cases"][2]["id"] = body["cases"][0]["id"]
    return body


def _nested(depth: int) -> Callable[[Body], Any]:
    def mutate(body: Body) -> Body:
        value: Any = 1
        for _ in range(depth):
            value = [value]
        body["cases"][1]["deepField"] = value
        return body

    return mutate


# (mutation, status, problems that must all be listed as (path, msg); a msg ending in
# '*' is a prefix). The base body is the reference meta with 4 cases.
BAD_REPORTS: dict[str, tuple[Callable[[Body], Any], int, list[tuple[str, str]]]] = {
    "missing meta": (_delete("meta"), 422, [("meta", "field required")]),
    "missing cases": (_delete("cases"), 422, [("cases", "field required")]),
    "missing case id": (_delete("cases.1.id"), 422, [("cases[1].id", "field required")]),
    "missing meta.shape.T": (_delete("meta.shape.T"), 422, [("meta.shape.T", "field required")]),
    "duplicate case id": (_duplicate_id, 422, [("cases[2].id", "duplicate case id *")]),
    "layerMS zero": (_set("cases.3.layerMS", 0), 422, [("cases[3].layerMS", "must be > 0")]),
    "forwardMS negative": (_set("cases.0.forwardMS", -1.5), 422,
                           [("cases[0].forwardMS", "must be > 0")]),
    "window zero": (_set("cases.2.windows.combined.4", 0.0), 422,
                    [("cases[2].windows.combined[4]", "must be > 0")]),
    "empty windows": (_set("cases.1.windows.combined", []), 422,
                      [("cases[1].windows.combined", "must have at least 1 item(s)")]),
    "empty forward windows": (_set("cases.1.windows.forward", []), 422,
                              [("cases[1].windows.forward", "must have at least 1 item(s)")]),
    "windows missing": (_delete("cases.0.windows"), 422, [("cases[0].windows", "field required")]),
    "ep as string": (_set("cases.0.ep", "8"), 422,
                     [("cases[0].ep", "Input should be a valid integer*")]),
    "ep as bool": (_set("cases.0.ep", True), 422,
                   [("cases[0].ep", "Input should be a valid integer*")]),
    "ep fractional": (_set("cases.0.ep", 8.5), 422, [("cases[0].ep", "Input should be*")]),
    "ep zero": (_set("cases.0.ep", 0), 422, [("cases[0].ep", "must be > 0")]),
    "ep past int64": (_set("cases.0.ep", 2**63), 422, [("cases[0].ep", "must be <= *")]),
    # ep is an INTEGER column: 2**31 passed validation, then Postgres failed (a 500).
    "ep past int32": (_set("cases.0.ep", 2**31), 422, [("cases[0].ep", "must be <= 2.14748e+09")]),
    "F past int64": (_set("cases.0.F", 2**63), 422, [("cases[0].F", "must be <= 9.22337e+18")]),
    "phase time zero": (_set("cases.0.phaseMS", {"dispatch": 0.2, "experts": 0, "combine": 0.1}),
                        422, [("cases[0].phaseMS.experts", "must be > 0")]),
    "phase missing": (_set("cases.0.phaseMS", {"dispatch": 0.2, "experts": 0.4}), 422,
                      [("cases[0].phaseMS.combine", "field required")]),
    "dispatch bandwidth negative": (_set("cases.1.dispatchGBps", -3.0), 422,
                                    [("cases[1].dispatchGBps", "must be >= 0")]),
    "throttle bits negative": (_set("cases.2.gpuState", {
        "smClockMinMHz": 1500, "smClockMaxMHz": 1980, "powerMaxW": 700, "temperatureMaxC": 70,
        "throttleReasons": -4, "samples": 3}), 422,
        [("cases[2].gpuState.throttleReasons", "must be >= 0")]),
    "mode unknown": (_set("cases.0.mode", "serving"), 422, [("cases[0].mode", "Input should be*")]),
    "layerMS as string": (_set("cases.0.layerMS", "fast"), 422,
                          [("cases[0].layerMS", "Input should be a valid number*")]),
    "check as string": (_set("cases.0.numericalAccepted", "yes"), 422,
                        [("cases[0].numericalAccepted", "Input should be a valid boolean*")]),
    "cases not a list": (_set("cases", {"a": 1}), 422,
                         [("cases", "Input should be a valid list*")]),
    "case not an object": (_set("cases.1", 5), 422, [("cases[1]", "Input should be*")]),
    "meta not an object": (_set("meta", "gb300"), 422, [("meta", "Input should be*")]),
    "peak negative": (_set("meta.theoreticalTFPerGPU.bf16", -1), 422,
                      [("meta.theoreticalTFPerGPU.bf16", "must be > 0")]),
    "NaN in a known field": (_raw('"layerMS": 1.4', '"layerMS": NaN, "x": 1.4'), 422,
                             [("cases[0].layerMS", "must be a finite number*")]),
    "Infinity in a known field": (_raw('"forwardMS": 1.4', '"forwardMS": Infinity, "x": 1.4'),
                                  422, [("cases[0].forwardMS", "must be a finite number*")]),
    "-Infinity in meta": (_raw('"theoreticalHBMGBps": 8000', '"theoreticalHBMGBps": -Infinity'),
                          422, [("meta.theoreticalHBMGBps", "must be a finite number*")]),
    "1e999 in a known field": (_raw('"usefulTFPerGPU": ', '"usefulTFPerGPU": 1e999, "x": '),
                               422, [("cases[0].usefulTFPerGPU", "must be a finite number*")]),
    "NaN in an unknown field": (_raw('"ep": 8', '"ep": 8, "futureMetric": NaN'), 422,
                                [("cases[0].futureMetric", "must be a finite number*")]),
    "-1e999 deep in an unknown field": (_raw('"ep": 8', '"ep": 8, "x": {"y": [1, -1e999]}'), 422,
                                        [("cases[0].x.y[1]", "must be a finite number*")]),
    "NUL in a known string": (_set("cases.0.category", "single\x00layer"), 422,
                              [("cases[0].category", "string contains a NUL byte*")]),
    "NUL in an unknown string": (_set("meta.futureNote", "a\x00b"), 422,
                                 [("meta.futureNote", "string contains a NUL byte*")]),
    "NUL in an unknown key": (_set("cases.2.bad\x00key", 1), 422,
                              [("cases[2]", "key 'bad\\x00key' contains a NUL byte*")]),
    "NUL in a known dict's key": (_set("meta.theoreticalTFPerGPU.fp\x008", 1), 422,
                                  [("meta.theoreticalTFPerGPU", "key 'fp\\x008' contains a NUL*")]),
    "surrogate in a known string": (_set("cases.0.precision", "bf\ud800"), 422,
                                    [("cases[0].precision", "string contains a lone UTF-16*")]),
    "surrogate in an unknown string": (_set("cases.0.note", "\udc00x"), 422,
                                       [("cases[0].note", "string contains a lone UTF-16*")]),
    "surrogate in an unknown key": (_set("cases.1.k\ud800", 1), 422,
                                    [("cases[1]", "key 'k\\ud800' contains a lone UTF-16*")]),
    # The path to the NUL runs through the bad key: it must still encode (was a 500).
    "problem below a surrogate key": (_set("cases.1.k\ud800", {"a": "\x00", "b": 1e999}), 422,
                                      [("cases[1]", "key 'k\\ud800' contains a lone UTF-16*"),
                                       ("cases[1].k\\ud800.a", "string contains a NUL byte*"),
                                       ("cases[1].k\\ud800.b", "must be a finite number*")]),
    "nested past the limit": (_nested(MAX_DEPTH + 10), 422,
                              [("cases[1].deepField" + "[0]" * (MAX_DEPTH - 3),
                                f"nested deeper than {MAX_DEPTH} levels")]),
    "top level a list": (lambda body: [body], 422, [("", "Input should be a valid dictionary*")]),
    "top level a string": (lambda body: "report", 422, [("", "Input should be*")]),
    "top level null": (lambda body: None, 422, [("", "Input should be*")]),
    "malformed JSON": (lambda body: json.dumps(body)[:-5].encode(), 400, [("", "malformed JSON*")]),
    "trailing garbage": (lambda body: json.dumps(body).encode() + b" x", 400,
                         [("", "malformed JSON*")]),
    "empty body": (lambda body: b"", 400, [("", "malformed JSON*")]),
    "not UTF-8": (lambda body: b'{"meta": "\xff\xfe"}', 400, [("", "body is not UTF-8*")]),
    "nested past the parser": (lambda body: b"[" * 100_000 + b"]" * 100_000, 400,
                               [("", "JSON nested deeper than*")]),
}


def _matches(expected: tuple[str, str], got: list[tuple[str, str]]) -> bool:
    path, msg = expected
    if msg.endswith("*"):
        return any(p == path and m.startswith(msg[:-1]) for p, m in got)
    return (path, msg) in got


def _post(client: TestClient, url: str, body: Any, headers: dict[str, str]) -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(url, content=content,
                       headers={**headers, "Content-Type": "application/json"})


def test_bad_reports_are_rejected_and_store_nothing(
    client: TestClient, auth: Auth, reference: Body, session: Session,
    subtests: pytest.Subtests,
) -> None:
    # Subtests rather than parameters: one client and one database clean-up for all.
    headers = auth("ingest")
    for name, (mutate, status, expected) in BAD_REPORTS.items():
        with subtests.test(name):
            # Compared with just before, so one wrongly stored report fails only its own
            # subtest (and the check after the loop), not every later one.
            before = row_counts(session), client.get(REPORTS).json()["total"]
            body = mutate(small_report(reference, 4))
            got = problems(_post(client, REPORTS, body, headers), status)
            for problem in expected:
                assert _matches(problem, got), (problem, got)
            assert (row_counts(session), client.get(REPORTS).json()["total"]) == before
    assert row_counts(session) == (0, 0, 0)
    assert client.get(REPORTS).json()["total"] == 0


def test_every_problem_of_a_report_is_listed(
    client: TestClient, auth: Auth, reference: Body, session: Session
) -> None:
    body = small_report(reference, 4)
    del body["meta"]["gpu"]
    body["cases"][0]["layerMS"] = 0
    del body["cases"][1]["id"]
    body["cases"][2]["windows"]["combined"] = []
    body["cases"][3]["id"] = body["cases"][0]["id"]
    body["cases"][3]["ep"] = "eight"
    body["cases"][3]["label"] = "nul\x00"
    text = json.dumps(body).replace('"forwardMS": ', '"forwardMS": NaN, "y": ', 1)

    got = problems(_post(client, REPORTS, text.encode(), auth("ingest")))
    expected = [
        ("cases[0].forwardMS", "must be a finite number (not NaN or Infinity)"),
        ("cases[0].layerMS", "must be > 0"),
        ("cases[1].id", "field required"),
        ("cases[2].windows.combined", "must have at least 1 item(s)"),
        ("cases[3].ep", "Input should be a valid integer"),
        ("cases[3].label", "string contains a NUL byte (\\u0000)"),
        ("meta.gpu", "field required"),
    ]
    for problem in expected:
        assert problem in got, (problem, got)
    assert any(p == "cases[3].id" and m.startswith("duplicate case id") for p, m in got)
    # Each problem once, in document order of the paths (cases before meta).
    assert len(got) == len(set(got)) == len(expected) + 1
    assert row_counts(session) == (0, 0, 0)


def test_errors_carry_loc_and_type(client: TestClient, auth: Auth, reference: Body) -> None:
    body = small_report(reference, 4)
    body["cases"][3]["layerMS"] = -2
    detail = error_detail(_post(client, REPORTS, body, auth("ingest")), 422, "validation_error")
    assert detail == [{"loc": ["body", "cases", 3, "layerMS"], "path": "cases[3].layerMS",
                       "msg": "must be > 0", "type": "greater_than"}]


def test_malformed_json_has_its_own_code(client: TestClient, auth: Auth) -> None:
    response = _post(client, REPORTS, b'{"meta": ', auth("ingest"))
    detail = error_detail(response, 400, "malformed_json")
    assert detail[0]["type"] == "json_invalid"
    assert "line 1 column 10" in detail[0]["msg"]


# --- POST /reports/{id}/cases ---------------------------------------------------------

BAD_APPENDS: dict[str, tuple[Callable[[Body], Any], int, list[tuple[str, str]]]] = {
    "no cases key": (_delete("cases"), 422, [("cases", "field required")]),
    "empty list": (_set("cases", []), 422, [("cases", "must have at least 1 item(s)")]),
    "unknown top-level key": (_set("meta", {}), 422, [("meta", "Extra inputs are not permitted")]),
    "missing case id": (_delete("cases.0.id"), 422, [("cases[0].id", "field required")]),
    "duplicate ids in the list": (_set("cases.1.id", "new-0"), 422,
                                  [("cases[1].id", "duplicate case id 'new-0'*")]),
    "layerMS zero": (_set("cases.1.layerMS", 0), 422, [("cases[1].layerMS", "must be > 0")]),
    "empty windows": (_set("cases.0.windows.combined", []), 422,
                      [("cases[0].windows.combined", "must have at least 1 item(s)")]),
    "wrong type": (_set("cases.0.F", "3072"), 422, [("cases[0].F", "Input should be*")]),
    "Infinity": (_raw('"layerMS": ', '"layerMS": Infinity, "x": '), 422,
                 [("cases[0].layerMS", "must be a finite number*")]),
    "1e999 unknown field": (_raw('"ep": ', '"big": 1e999, "ep": '), 422,
                            [("cases[0].big", "must be a finite number*")]),
    "NUL in a key": (_set("cases.0.a\x00", 1), 422, [("cases[0]", "key 'a\\x00' contains a NUL*")]),
    "surrogate in a value": (_set("cases.1.pipeline", "\ud83d"), 422,
                             [("cases[1].pipeline", "string contains a lone UTF-16*")]),
    "nested too deep": (_nested(MAX_DEPTH + 1), 422, [("cases[1].deepField*", "nested deeper*")]),
    "a list": (lambda body: body["cases"], 422, [("", "Input should be*")]),
    "malformed": (lambda body: b'{"cases": [', 400, [("", "malformed JSON*")]),
}


def _new_cases(reference: Body) -> Body:
    cases = small_report(reference, 6)["cases"][4:]
    for i, case in enumerate(cases):
        case["id"] = f"new-{i}"
    return {"cases": cases}


def test_bad_appends_are_rejected_and_change_nothing(
    client: TestClient, auth: Auth, reference: Body, session: Session,
    subtests: pytest.Subtests,
) -> None:
    headers = auth("ingest")
    created = client.post(REPORTS, json=small_report(reference, 2), headers=headers)
    assert created.status_code == 201, created.text
    report_id = created.json()["id"]
    original = client.get(f"{REPORTS}/{report_id}/report.json").json()

    for name, (mutate, status, expected) in BAD_APPENDS.items():
        with subtests.test(name):
            counts = row_counts(session)
            before = client.get(f"{REPORTS}/{report_id}/report.json").json()
            body = mutate(_new_cases(reference))
            got = problems(_post(client, f"{REPORTS}/{report_id}/cases", body, headers), status)
            for path, msg in expected:
                if path.endswith("*"):
                    assert any(p.startswith(path[:-1]) and m.startswith(msg[:-1])
                               for p, m in got), got
                else:
                    assert _matches((path, msg), got), ((path, msg), got)
            assert row_counts(session) == counts
            assert client.get(f"{REPORTS}/{report_id}/report.json").json() == before
    assert client.get(f"{REPORTS}/{report_id}").json()["caseCount"] == 2
    assert client.get(f"{REPORTS}/{report_id}/report.json").json() == original


# --- ingest.validate without a server -------------------------------------------------


def test_format_path() -> None:
    assert format_path(("cases", 3, "layerMS")) == "cases[3].layerMS"
    assert format_path(("meta", "shape", "T")) == "meta.shape.T"
    assert format_path(("cases", 0, "windows", "combined", 2)) == "cases[0].windows.combined[2]"
    assert format_path(()) == ""
    assert format_path((1, "a")) == "[1].a"
    # A lone surrogate is escaped, so the path can be printed and sent as UTF-8.
    assert format_path(("cases", 0, "k\ud800")) == "cases[0].k\\ud800"
    assert format_path(("cases", 0, "k\x00")) == "cases[0].k\\x00"
    assert str(Problem(("cases", 3, "layerMS"), "must be > 0", "greater_than")) == (
        "cases[3].layerMS: must be > 0"
    )
    assert str(Problem((), "malformed JSON", "json_invalid")) == "<root>: malformed JSON"


def test_parse_json_accepts_json_and_keeps_floats_exact() -> None:
    assert parse_json(b'{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}
    assert parse_json('{"x": 0.1234567890123456789}')["x"] == 0.12345678901234568
    assert parse_json(b'{"s": "\\ud83d\\ude00"}') == {"s": "\U0001F600"}


def test_parse_json_leaves_non_finite_numbers_to_the_tree_check() -> None:
    parsed = parse_json(b'{"a": NaN, "b": Infinity, "c": -Infinity, "d": 1e999}')
    assert math.isnan(parsed["a"])
    assert parsed["b"] == parsed["d"] == math.inf and parsed["c"] == -math.inf
    found = {(format_path(p.loc), p.type) for p in tree_problems(parsed)}
    assert found == {(k, "finite_number") for k in "abcd"}


@pytest.mark.parametrize(
    ("body", "type_", "msg"),
    [
        (b'{"a": ', "json_invalid", "malformed JSON: Expecting value at line 1 column 7"),
        (b"", "json_invalid", "malformed JSON: Expecting value at line 1 column 1"),
        (b"{} {}", "json_invalid", "malformed JSON: Extra data at line 1 column 4"),
        (b'"\xff"', "json_invalid", "body is not UTF-8: invalid start byte"),
        (b"[" * 50_000 + b"]" * 50_000, "json_too_deep", f"JSON nested deeper than {MAX_DEPTH}"),
        (b"1" * 5000, "json_invalid", "Exceeds the limit (4300 digits)"),
    ],
)
def test_parse_json_rejects_malformed_bodies(body: bytes, type_: str, msg: str) -> None:
    with pytest.raises(InvalidPayload) as raised:
        parse_json(body)
    assert raised.value.malformed
    [problem] = raised.value.problems
    assert problem.loc == () and problem.type == type_
    assert problem.msg.startswith(msg), problem.msg


def test_tree_problems() -> None:
    clean = {"a": [1, 2.5, {"b": "text", "c": None}], "ünï": "cödé 😀"}
    assert list(tree_problems(clean)) == []

    tree = {"a": ["ok", "n\x00l"], "b\x00": 1, "c": {"d": "\udfff"}, "e\ud800": math.nan}
    found = {(format_path(p.loc), p.type, p.msg) for p in tree_problems(tree)}
    assert found == {
        ("a[1]", "string_nul", "string contains a NUL byte (\\u0000)"),
        ("", "string_nul", "key 'b\\x00' contains a NUL byte (\\u0000)"),
        ("c.d", "string_surrogate", "string contains a lone UTF-16 surrogate"),
        ("", "string_surrogate", "key 'e\\ud800' contains a lone UTF-16 surrogate"),
        ("e\\ud800", "finite_number", "must be a finite number (not NaN or Infinity)"),
    }


def test_tree_problems_stops_at_max_depth_without_recursion() -> None:
    deep: Any = "x\x00"
    for _ in range(5000):  # far past the interpreter's recursion limit
        deep = {"k": deep}
    [problem] = list(tree_problems(deep))
    assert problem.type == "json_too_deep"
    assert len(problem.loc) == MAX_DEPTH

    shallow: Any = "x"
    for _ in range(MAX_DEPTH):
        shallow = [shallow]
    assert list(tree_problems(shallow)) == []


def test_validate_report_accepts_the_reference(reference: Body) -> None:
    report = validate_report(reference)
    assert len(report.cases) == 63
    assert report.meta.theoreticalTFPerGPU == {"bf16": 2500, "mxfp8": 5000, "nvfp4": 15000}


def test_validate_report_lists_problems_sorted_and_once(reference: Body) -> None:
    body = small_report(reference, 3)
    body["cases"][2]["layerMS"] = 0
    body["cases"][0]["ooms"] = -1
    body["cases"][1]["forwardMS"] = math.inf
    body["meta"]["shape"]["K"] = 0
    with pytest.raises(InvalidPayload) as raised:
        validate_report(body)
    assert not raised.value.malformed
    assert [str(p) for p in raised.value.problems] == [
        "cases[0].ooms: must be >= 0",
        "cases[1].forwardMS: must be a finite number (not NaN or Infinity)",
        "cases[2].layerMS: must be > 0",
        "meta.shape.K: must be > 0",
    ]


def test_validate_case_list(reference: Body) -> None:
    assert len(validate_case_list({"cases": reference["cases"][:3]}).cases) == 3
    with pytest.raises(InvalidPayload) as raised:
        validate_case_list({"cases": [reference["cases"][0], reference["cases"][0]]})
    [problem] = raised.value.problems
    assert problem.loc == ("cases", 1, "id") and problem.type == "duplicate_id"
