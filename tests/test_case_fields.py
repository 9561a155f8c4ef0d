"""Each case field is declared once, in ``app.case_fields``: the model holds a column for every
declared column and nothing else, and a field declared filterable, sortable or tabled is a
filter, a sort key and a table column of the API and the dashboard. Expectations come from
the reference report's own values (the derived ones from the case the API returns), sorted
and filtered here in Python."""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from api_helpers import REPORTS
from fastapi.testclient import TestClient
from sqlalchemy import JSON, BigInteger, Boolean, Float, Integer, String, Text
from sqlalchemy.orm import Session

from app import case_fields
from app.case_fields import FIELDS, FILTERABLE, SORTABLE, TABLED, CaseField, CaseFilter
from app.case_view import case_view
from app.dashboard import filters
from app.models import CaseRow
from app.repository import cases as cases_repo
from app.services import case_table, report_view
from ingest.derived import derive
from ingest.schema import Case
from ingest.validate import validate_report

Body = dict[str, Any]
Auth = Callable[[str], dict[str, str]]

# Columns of a case row that hold no case field: keys, bookkeeping, and what history reads
# (the windows' range, phaseMS's three phases).
_BOOKKEEPING = {"id", "report_id", "position", "content_sha256", "window_min_ms",
                "window_max_ms", "phase_dispatch_ms", "phase_experts_ms", "phase_combine_ms"}
_KIND_OF_TYPE = {Integer: int, BigInteger: int, Float: float, String: str, Text: str,
                 Boolean: bool}


def test_every_case_column_is_one_declared_field_of_its_kind() -> None:
    columns = {c.key: c for c in CaseRow.__table__.columns if c.key not in _BOOKKEEPING}
    declared = [f.column for f in FIELDS if f.column is not None]
    assert sorted(declared) == sorted(columns)  # each column once, none undeclared
    for field in FIELDS:
        if field.column is None:
            continue
        column_type = type(columns[field.column].type)
        if column_type is JSON:
            assert field.kind in (list, dict), field.wire
        else:
            assert _KIND_OF_TYPE[column_type] is field.kind, field.wire


def test_every_field_is_on_the_wire_or_derived(reference: Body) -> None:
    report = validate_report(reference)
    derived = derive(report.meta, report.cases[0]).as_dict()
    for field in FIELDS:
        if field.derived:
            assert field.wire in derived, field.wire
        else:
            assert field.wire in Case.model_fields, field.wire
    assert {f.wire for f in case_fields.DERIVED} == set(derived)


@pytest.fixture
def stored(client: TestClient, auth: Auth, reference: Body) -> tuple[int, list[Body]]:
    """The reference report posted, and its cases as the API returns them, in report order."""
    posted = client.post(REPORTS, json=reference, headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    report_id = posted.json()["id"]
    items = client.get(f"{REPORTS}/{report_id}/cases").json()["items"]
    assert [c["id"] for c in items] == [c["id"] for c in reference["cases"]]
    return report_id, items


# Fields whose definition (docs/metrics.md) needs more than the case and the meta hold
# (the measured ceilings, the busiest rank's model bytes, the limiter's thresholds): taken
# as served; every other derived field is worked out here from the reference JSON.
AS_SERVED = {"percentOfMeasuredCeiling", "hbmUtilPercent", "limiter"}


def _by_hand(field: CaseField, case: Body, meta: Body, served: Body) -> Any:
    """A tabled field's value from the report as posted, derived ones by docs/metrics.md's
    arithmetic, written here apart from ingest.derived."""
    if not field.derived:
        return case.get(field.wire)
    if field.wire in AS_SERVED:
        return served[field.wire]
    rows = case["receiveRows"]
    hot = max(rows) / (sum(rows) / len(rows))
    windows = sorted(case["windows"]["combined"])
    median = (windows[(len(windows) - 1) // 2] + windows[len(windows) // 2]) / 2
    link = meta["theoreticalNVLinkGBpsPerDirection"]
    peak = case["usefulTFPerGPU"] / meta["theoreticalTFPerGPU"][case["precision"]] * 100
    phases = case.get("phaseMS")
    return {
        "percentOfPeak": peak,
        "hbmPercentOfPeak": case["analyticalHBMGBps"] / meta["theoreticalHBMGBps"] * 100,
        "nvlinkTXPercentOfPeak": case["nvlinkTXGBps"] / link * 100,
        "nvlinkRXPercentOfPeak": case["nvlinkRXGBps"] / link * 100,
        "windowSpreadPercent": (windows[-1] - windows[0]) / median * 100,
        "observedImbalance": hot,
        "computeUtilPercent": peak * hot,
        "nvlinkUtilPercent": max(case["nvlinkMaxTXGBps"], case["nvlinkMaxRXGBps"]) / link * 100,
        "communicationSharePercent": None if not phases else
        (phases["dispatch"] + phases["combine"]) / sum(phases.values()) * 100,
    }[field.wire]


def _value(field: CaseField, reference_case: Body, served: Body) -> Any:
    # Wire values from the report as posted; derived ones exist only in what is served.
    return served[field.wire] if field.derived else reference_case.get(field.wire)


def _ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.text
    return [c["id"] for c in response.json()["items"]]


@pytest.mark.parametrize("field", SORTABLE, ids=lambda f: f.wire)
def test_every_sortable_field_sorts_the_api(
    client: TestClient, reference: Body, stored: tuple[int, list[Body]], field: CaseField,
) -> None:
    report_id, served = stored
    values = [(_value(field, ref, got), ref["id"])
              for ref, got in zip(reference["cases"], served, strict=True)]
    for order in ("asc", "desc"):
        # sorted() is stable, also reversed: ties keep report order. Unmeasured cases last.
        known = sorted((v for v in values if v[0] is not None),
                       key=lambda v: v[0], reverse=order == "desc")
        expected = [v[1] for v in known] + [v[1] for v in values if v[0] is None]
        got = client.get(f"{REPORTS}/{report_id}/cases",
                         params={"sort": field.wire, "order": order})
        assert _ids(got) == expected, order


@pytest.mark.parametrize("field", FILTERABLE, ids=lambda f: f.wire)
def test_every_filterable_field_filters_the_api_the_page_and_the_facets(
    client: TestClient, reference: Body, stored: tuple[int, list[Body]], session: Session,
    field: CaseField,
) -> None:
    report_id, served = stored
    # A derived field (the limiter) has its values from ingest, not from the report.
    source = served if field.derived else reference["cases"]
    counts = Counter(c[field.wire] for c in source)
    # The commonest value, and the rarest where that still leaves some out ("any of").
    ranked = [value for value, _ in counts.most_common()]
    chosen = ranked[:1] + ranked[-1:] if len(ranked) > 2 else ranked[:1]
    expected = [c["id"] for c in source if c[field.wire] in chosen]
    assert 0 < len(expected) < len(reference["cases"]) or len(counts) == 1

    api = client.get(f"{REPORTS}/{report_id}/cases", params={field.wire: chosen})
    assert _ids(api) == expected
    detail = client.get(f"{REPORTS}/{report_id}").json()
    assert detail["summary"][field.wire] == sorted(counts)

    picked = CaseFilter(**{field.wire: chosen})
    assert filters.filters_from_search(filters.search_from_filters(picked)) == picked
    view = report_view.report_view(report_view.ReportCache(), session, report_id, picked)
    assert [c.id for c in view.cases] == expected
    assert [r["id"] for r in view.rows] == expected

    # Caveat counts over the cases in view: each case once per code.
    in_view = [c for c in detail_cases(client, report_id) if c["id"] in set(expected)]
    want = Counter(code for c in in_view for code in {v["code"] for v in c["caveats"]})
    assert cases_repo.caveat_counts(session, report_id, picked) == dict(sorted(want.items()))
    assert view.caveats == dict(sorted(want.items()))


def detail_cases(client: TestClient, report_id: int) -> list[Body]:
    return list(client.get(f"{REPORTS}/{report_id}/cases").json()["items"])


@pytest.mark.parametrize("field", TABLED, ids=lambda f: f.wire)
def test_every_tabled_field_is_a_column_of_the_table_and_the_csv(
    reference: Body, stored: tuple[int, list[Body]], field: CaseField,
) -> None:
    _, served = stored
    rows = [case_table.table_row(case_view(case)) for case in served]
    parsed = list(csv.DictReader(io.StringIO(case_table.csv_text(rows))))
    assert (field.wire, field.label) in case_table.TABLE_COLUMNS
    meta = reference["meta"]
    for ref, got, row, line in zip(reference["cases"], served, rows, parsed, strict=True):
        value = _by_hand(field, ref, meta, got)
        if isinstance(value, float):
            assert row.get(field.wire) == pytest.approx(value, rel=1e-9), (field.wire, ref["id"])
            assert float(line[field.wire]) == pytest.approx(value, rel=1e-9)
        else:
            assert row.get(field.wire) == value, (field.wire, ref["id"])
            assert line[field.wire] == ("" if value is None else str(value))


def test_a_filter_of_an_unknown_field_is_refused() -> None:
    with pytest.raises(TypeError, match="not a filterable case field: layerMS"):
        CaseFilter(layerMS=[1.0])


def test_table_numbers_read_as_the_page_grid_shows_them() -> None:
    from app.services.case_text import table_number
    # toLocaleString("en-US", {maximumSignificantDigits: 4}) of each, worked out by hand.
    assert table_number(1139.98) == "1,140"
    assert table_number(0.123456) == "0.1235"
    assert table_number(2.0) == "2"
    assert table_number(12345.6) == "12,350"
    assert table_number(45.59935) == "45.6"
    assert table_number(-3.14159) == "-3.142"
    assert table_number(12288) == "12,288"
    assert table_number(0.0) == "0"


def test_the_typed_case_view_reads_declared_fields_of_their_kind(
    reference: Body, stored: tuple[int, list[Body]]
) -> None:
    """Each attribute of the read path's CaseView is a case field of that wire name, its
    type the field's kind (or None where the field may be missing); built from a served case
    it holds that case's values, and its caveat codes."""
    import types
    import typing
    from collections.abc import Mapping

    from app.case_view import WIRE_NAMES, CaseView

    declared = {f.wire: f for f in FIELDS}
    hints = typing.get_type_hints(CaseView)
    # A wire array is held as a tuple, a wire object as a read-only mapping.
    held = {list: tuple, dict: Mapping}
    assert set(WIRE_NAMES) == set(declared)
    for name in WIRE_NAMES:
        hint = hints[name]
        union = isinstance(hint, types.UnionType)
        kinds = {typing.get_origin(k) or k for k in (typing.get_args(hint) if union else (hint,))}
        assert held.get(declared[name].kind, declared[name].kind) in kinds, (name, hints[name])
    _, served = stored
    for ref, got in zip(reference["cases"], served, strict=True):
        view = case_view(got)
        assert (view.id, view.ep, view.F, view.layerMS) == (
            ref["id"], ref["ep"], ref["F"], ref["layerMS"])
        rows = ref["receiveRows"]
        assert view.hotRankFactor == pytest.approx(max(rows) / (sum(rows) / len(rows)))
        assert view.caveat_codes == {c["code"] for c in got["caveats"]}
