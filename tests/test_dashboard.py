"""The dashboard's plain functions and page callbacks, on SQLite and Postgres, no server."""

from __future__ import annotations

import copy
import csv
import importlib
import io
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from dash.development.base_component import Component
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app import figures
from app.api.schemas import case_out
from app.dashboard import data
from app.main import create_app
from app.repository import cases as cases_repo
from app.repository import reports as reports_repo
from app.repository.cases import CaseFilter
from ingest.validate import validate_report

SCRIPT_NOTE = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"


def ingest(session: Session, raw: dict[str, Any]) -> int:
    result = reports_repo.ingest_report(session, raw, validate_report(raw))
    session.commit()
    return result.id


@pytest.fixture
def pages(settings_env: Callable[..., None]) -> dict[str, ModuleType]:
    """The page modules, imported as Dash imports them (after the app exists)."""
    create_app()
    return {name: importlib.import_module(f"app.dashboard.pages.{name}")
            for name in ("reports", "report", "case", "compare")}


@pytest.fixture
def reference_id(session: Session, reference: dict[str, Any]) -> int:
    return ingest(session, reference)


def texts(component: Any) -> list[str]:
    """Every string child in a Dash component tree (what the browser shows as text)."""
    if isinstance(component, str):
        return [component]
    if isinstance(component, list | tuple):
        return [t for c in component for t in texts(c)]
    if isinstance(component, Component):
        return texts(getattr(component, "children", None))
    return []


def find(component: Any, component_id: str) -> Any:
    if isinstance(component, list | tuple):
        for c in component:
            hit = find(c, component_id)
            if hit is not None:
                return hit
    if isinstance(component, Component):
        if getattr(component, "id", None) == component_id:
            return component
        return find(getattr(component, "children", None), component_id)
    return None


# --- pure functions ----------------------------------------------------------------------


def test_filters_round_trip_through_the_url() -> None:
    chosen = CaseFilter(mode=["training"], ep=[16, 64], precision=["mxfp8"], imbalance=[4.0])
    search = data.search_from_filters(chosen)
    assert search == "?mode=training&ep=16,64&precision=mxfp8&imbalance=4"
    assert data.filters_from_search(search) == chosen
    assert data.search_from_filters(CaseFilter()) == ""
    # Dash hands repeated keys as lists; a bad number filters nothing instead of failing.
    assert data.filters_from_query({"ep": ["8", "x"], "F": "3072,1536"}) == CaseFilter(
        ep=[8], F=[3072, 1536])
    assert data.filters_from_controls([["inference"], None, [], [], [], ["6144"], ["1.0"]]) \
        == CaseFilter(mode=["inference"], F=[6144], imbalance=[1.0])


def test_links_are_built_from_quoted_ids() -> None:
    assert data.case_href(3, "a/b?c=<x>") == "/reports/3/cases/a%2Fb%3Fc%3D%3Cx%3E"
    assert data.case_href(3, "javascript:alert(1)").startswith("/reports/3/cases/")
    assert data.report_json_href(7) == "/api/v1/reports/7/report.json"


def test_csv_escapes_formulas_and_keeps_every_row() -> None:
    rows = [{"id": "=HYPERLINK(\"http://x\")", "mode": "inference", "ep": 8, "caveats": ""},
            {"id": "plain", "mode": "training", "ep": 16, "caveats": "oom recompute"}]
    parsed = list(csv.reader(io.StringIO(data.csv_text(rows))))
    assert parsed[0] == [name for name, _ in data.TABLE_COLUMNS]
    assert parsed[1][0] == "'=HYPERLINK(\"http://x\")"
    assert parsed[2][:3] == ["plain", "training", "16"]
    assert parsed[2][-1] == "oom recompute"


def test_change_verdicts() -> None:
    assert data.change(10.0, 11.0, higher_is_better=False).verdict == "regression"
    assert data.change(10.0, 11.0, higher_is_better=True).verdict == "improvement"
    assert data.change(10.0, 10.4, higher_is_better=True).verdict == ""
    assert data.change(None, 1.0, higher_is_better=True).percent is None


# --- against the database ----------------------------------------------------------------


def test_report_view_filters_and_qualifies_every_chart(
    session: Session, reference_id: int, settings_env: Callable[..., None]
) -> None:
    view = data.report_view(session, reference_id, CaseFilter())
    assert len(view.cases) == 63 and view.count_text == "63 of 63 cases in view"
    assert [p.key for p in view.panels] == [c.key for c in figures.CHARTS]
    notes = {p.key: [n.key for n in p.notes] for p in view.panels}
    assert notes["percent-of-peak"] == ["peakNote", "timingNote", "placementNote"]
    assert notes["nvlink"] == ["bandwidthNote", "placementNote"]
    assert notes["memory"] == ["memoryNote", "placementNote"]
    assert view.panels[0].caveats == cases_repo.caveat_counts(session, reference_id)

    bf16_ep8 = data.report_view(session, reference_id, CaseFilter(precision=["bf16"], ep=[8]))
    assert {(c["precision"], c["ep"]) for c in bf16_ep8.cases} == {("bf16", 8)}
    assert all("placementNote" not in [n.key for n in p.notes] for p in bf16_ep8.panels)
    assert bf16_ep8.search == "?ep=8&precision=bf16"
    assert [r["id"] for r in bf16_ep8.rows] == [c["id"] for c in bf16_ep8.cases]
    assert bf16_ep8.rows[0]["href"] == data.case_href(reference_id, bf16_ep8.cases[0]["id"])


def test_view_cases_are_what_the_api_serves(session: Session, reference_id: int) -> None:
    rows, _ = cases_repo.list_cases(session, reference_id)
    assert data.view_cases(session, reference_id, CaseFilter()) == [case_out(r) for r in rows]
    some = data.view_cases(session, reference_id, CaseFilter(mode=["training"], ep=[64]))
    assert some and {(c["mode"], c["ep"]) for c in some} == {("training", 64)}


def test_reports_page_lists_newest_first_and_searches(
    session: Session, reference: dict[str, Any], pages: dict[str, ModuleType]
) -> None:
    empty = pages["reports"].layout()
    assert "moescope ingest report.json" in "\n".join(texts(empty))
    first = ingest(session, reference)
    other = copy.deepcopy(reference)
    other["meta"]["gpu"] = "Other GPU <b>bold</b>"
    second = ingest(session, other)
    rows = data.report_list(session)
    assert [r["id"] for r in rows] == [second, first]
    assert rows[0]["caseCount"] == 63 and rows[0]["bestPercentOfPeak"] is not None
    found = pages["reports"].search("other gpu")
    assert "Other GPU <b>bold</b>" in texts(found) and reference["meta"]["gpu"] not in texts(found)
    assert "No report matches the search." in texts(pages["reports"].search("nothing-like-it"))


def test_report_page_and_filter_callback(
    reference_id: int, pages: dict[str, ModuleType]
) -> None:
    report = pages["report"]
    page = report.layout(str(reference_id), precision="nvfp4")
    assert find(page, "report-count").children == "9 of 63 cases in view"
    assert find(page, "report-filter-precision").value == ["nvfp4"]
    graph = find(page, "report-graph-throughput")
    assert sum(len(t["x"]) for t in graph.figure["data"]) == 9
    assert find(page, "report-json-link").href == f"/api/v1/reports/{reference_id}/report.json"

    values = [[], [], ["bf16"], [], [], [], []]
    out = report.refilter(*values, reference_id)
    assert len(out) == len(report.OUTPUTS)
    throughput = out[0]
    assert sum(len(t["x"]) for t in throughput["data"]) == 18
    assert out[-2] == "18 of 63 cases in view"
    assert out[-1] == "?precision=bf16"
    assert len(out[-3]) == 18  # table rows

    assert "Not found" in texts(report.layout("12345"))
    assert "Not found" in texts(report.layout("abc"))


def test_every_note_is_shown_as_text(
    session: Session, reference: dict[str, Any], pages: dict[str, ModuleType]
) -> None:
    reference["meta"]["peakNote"] = SCRIPT_NOTE
    reference["meta"]["customNote"] = "a note the dashboard does not know"
    rid = ingest(session, reference)
    page = pages["report"].layout(str(rid))
    notes = texts(find(page, "report-notes"))
    assert SCRIPT_NOTE in notes and "a note the dashboard does not know" in notes
    assert "customNote" in notes
    assert SCRIPT_NOTE in texts(find(page, "report-aside-percent-of-peak"))


def test_case_page_shows_every_field(
    session: Session, reference_id: int, reference: dict[str, Any],
    pages: dict[str, ModuleType]
) -> None:
    raw = next(c for c in reference["cases"] if c["mode"] == "training")
    page = pages["case"].layout(str(reference_id), raw["id"])
    fields = find(page, "case-fields")
    shown = texts(fields)
    for key in (*raw, "percentOfPeak", "observedImbalance"):
        assert key in shown
    for key in ("windows", "receive-rows", "memory", "saved-bytes"):
        assert find(page, f"case-graph-{key}") is not None
    assert "Not found" in texts(pages["case"].layout(str(reference_id), "no-such-case"))


def test_compare_matches_cases_and_flags_changes(
    session: Session, reference: dict[str, Any], pages: dict[str, ModuleType]
) -> None:
    base = ingest(session, reference)
    head_raw = copy.deepcopy(reference)
    head_raw["meta"]["runId"] = "head"
    slower, faster, gone = head_raw["cases"][0], head_raw["cases"][1], head_raw["cases"][2]
    slower["layerMS"] *= 1.10
    faster["usefulTFPerGPU"] *= 1.20
    head_raw["cases"].remove(gone)
    added = copy.deepcopy(head_raw["cases"][3])
    added["id"] = "new-case"
    head_raw["cases"].append(added)
    head = ingest(session, head_raw)

    result = data.compare(data.report_cases(session, base), data.report_cases(session, head))
    assert result.only_base == [gone["id"]] and result.only_head == ["new-case"]
    by_id = {r["id"]: r["changes"] for r in result.rows}
    assert len(by_id) == 62
    assert by_id[slower["id"]]["layerMS"].verdict == "regression"
    assert by_id[slower["id"]]["layerMS"].percent == pytest.approx(10.0)
    assert by_id[faster["id"]]["usefulTFPerGPU"].verdict == "improvement"
    assert by_id[faster["id"]]["percentOfPeak"].verdict == "improvement"
    assert by_id[reference["cases"][5]["id"]]["layerMS"].verdict == ""

    view, search = pages["compare"].choose(base, head)
    assert search == f"?base={base}&head={head}"
    assert "62 matched case(s); 1 regression(s) and 2 improvement(s) over 5 %." in texts(view)


@pytest.fixture
def app_client(settings_env: Callable[..., None], engine: Any) -> Iterator[TestClient]:
    with TestClient(create_app()) as client:
        yield client


def test_dashboard_is_served_at_the_root_beside_the_api(app_client: TestClient) -> None:
    index = app_client.get("/")
    assert index.status_code == 200 and "_dash-renderer" in index.text
    assert app_client.get("/reports/1").status_code == 200
    assert app_client.get("/assets/style.css").status_code == 200
    assert app_client.get("/docs").status_code == 200
    assert app_client.get("/api/v1/reports").json()["total"] == 0
    missing = app_client.get("/api/v1/no-such-route")
    assert missing.status_code == 404 and missing.json()["error"]
