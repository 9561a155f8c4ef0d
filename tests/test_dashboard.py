"""The dashboard's plain functions and page callbacks, on SQLite and Postgres, no server."""

from __future__ import annotations

import copy
import csv
import dataclasses
import importlib
import io
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from dash.development.base_component import Component
from fastapi.testclient import TestClient
from page_helpers import find, texts
from sqlalchemy.orm import Session
from views import view, views

from app import figures
from app.case_fields import FILTERABLE, CaseFilter
from app.case_view import CaseView
from app.dashboard import filters, links
from app.main import create_app
from app.matrix_metrics import DEFAULT_METRIC
from app.repository import cases as cases_repo
from app.services import case_table, chart_panels, comparison, report_list, report_view
from app.services import cases as case_service
from app.services import reports as report_service
from app.services.against_history import CaseMark, ReportMarks
from ingest.regressions import Settings
from ingest.validate import validate_report

SCRIPT_NOTE = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"


def ingest(session: Session, raw: dict[str, Any]) -> int:
    result = report_service.ingest_report(session, raw, validate_report(raw))
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


# --- pure functions ----------------------------------------------------------------------


def test_filters_round_trip_through_the_url() -> None:
    chosen = CaseFilter(mode=["training"], ep=[16, 64], precision=["mxfp8"], imbalance=[4.0])
    search = filters.search_from_filters(chosen)
    assert search == "?mode=training&ep=16,64&precision=mxfp8&imbalance=4"
    assert filters.filters_from_search(search) == chosen
    assert filters.search_from_filters(CaseFilter()) == ""
    # Dash hands repeated keys as lists; a bad number filters nothing instead of failing.
    assert filters.filters_from_query({"ep": ["8", "x"], "F": "3072,1536"}) == CaseFilter(
        ep=[8], F=[3072, 1536])
    assert filters.filters_from_controls(
        [["inference"], None, [], [], [], ["6144"], ["1.0"], None]) \
        == CaseFilter(mode=["inference"], F=[6144], imbalance=[1.0])


def test_load_commands_expand_the_token_in_a_shell() -> None:
    """Pasted into a shell, the curl command sends the token, not its variable's name."""
    curl = next(c for c in report_list.load_commands("$MOESCOPE_URL") if c.startswith("curl "))
    out = subprocess.run(["bash", "-c", "printf '%s\\n' " + curl.removeprefix("curl ")],
                         capture_output=True, text=True, check=True,
                         env={"MOESCOPE_TOKEN": "s3cret", "MOESCOPE_URL": "http://h"}).stdout
    assert "Authorization: Bearer s3cret" in out.splitlines()
    assert "http://h/api/v1/reports" in out.splitlines()


def test_links_are_built_from_quoted_ids() -> None:
    assert links.case_href(3, "a/b?c=<x>") == "/reports/3/cases/a%2Fb%3Fc%3D%3Cx%3E"
    assert links.case_href(3, "javascript:alert(1)").startswith("/reports/3/cases/")
    assert links.report_json_href(7) == "/api/v1/reports/7/report.json"


def test_csv_escapes_formulas_and_keeps_every_row() -> None:
    rows = [{"id": "=HYPERLINK(\"http://x\")", "mode": "inference", "ep": 8, "caveats": ""},
            {"id": "plain", "mode": "training", "ep": 16, "caveats": "oom recompute"}]
    parsed = list(csv.reader(io.StringIO(case_table.csv_text(rows))))
    assert parsed[0] == [name for name, _ in case_table.TABLE_COLUMNS]
    assert parsed[1][0] == "'=HYPERLINK(\"http://x\")"
    assert parsed[2][:3] == ["plain", "training", "16"]
    assert parsed[2][-1] == "oom recompute"


def _fake_case(case_id: str, useful: float | None) -> CaseView:
    return view({"id": case_id, "usefulTFPerGPU": useful})


def test_chart_cases_keep_the_highest_useful_throughput_in_view_order() -> None:
    cases = [_fake_case("e", 5.0), _fake_case("a", None), _fake_case("d", 9.0),
             _fake_case("c", 7.0), _fake_case("b", 7.0), _fake_case("f", 1.0)]
    # The top three: d (9), then the tie at 7 broken by id (b before c); view order kept.
    assert [c.id for c in chart_panels.chart_cases(cases, cap=3)] == ["d", "c", "b"]
    assert [c.id for c in chart_panels.chart_cases(cases, cap=2)] == ["d", "b"]
    # Unmeasured cases come last: charted only once every measured one is.
    assert "a" not in [c.id for c in chart_panels.chart_cases(cases, cap=5)]
    assert [c.id for c in chart_panels.chart_cases(cases, cap=6)] == [c.id for c in cases]
    assert chart_panels.chart_cases(cases, cap=100) == cases


def test_cap_banner_names_both_counts() -> None:
    assert chart_panels.cap_banner(400, 400) == ""
    assert chart_panels.cap_banner(12, 12) == ""
    assert chart_panels.cap_banner(400, 5000) == (
        "Charts show the 400 cases with the highest useful TFLOP/s of 5000 in view; narrow "
        "the filters to chart the rest. Caveat counts, the table and the CSV cover all 5000.")


def _drawn_ids(spec: dict[str, Any]) -> set[str]:
    """Every case id a chart draws (hover ids)."""
    ids: set[str] = set()
    for trace in spec["data"]:
        # The routing heatmap's rows are its imbalance dots' cases (they name their ids).
        ids.update(row[0] for row in trace.get("customdata") or [])
    return ids


def test_every_chart_draws_the_same_capped_subset(
    reference: dict[str, Any], session: Session, reference_id: int
) -> None:
    cases = case_service.view_cases(session, reference_id, CaseFilter())
    charted = chart_panels.chart_cases(views(cases), cap=10)
    counts = cases_repo.caveat_counts(session, reference_id)
    panels = chart_panels.chart_panels(reference["meta"], views(cases), counts, charted)
    want = {figures.text(c.id) for c in charted}
    ranked = sorted(cases, key=lambda c: -c["usefulTFPerGPU"])
    assert want == {figures.text(c["id"]) for c in ranked[:10]}
    for panel in panels:
        drawn = _drawn_ids(panel.figure)
        if panel.key in ("scaling", "intensity"):  # these draw the cases they can place
            assert drawn and drawn <= want, panel.key
        else:
            assert drawn == want, panel.key
        assert (panel.charted, panel.case_count) == (10, 63)
        # Caveats cover every case in view, not only the charted ones.
        assert panel.caveats == dict(sorted(Counter(
            code for c in cases for code in {v["code"] for v in c["caveats"]}).items()))


def test_report_view_over_the_cap_shows_the_banner_and_keeps_every_row(
    reference_id: int, pages: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chart_panels, "CHART_CASE_CAP", 20)
    report = pages["report"]
    page = report.layout(str(reference_id))
    banner = find(page, "report-cap-banner")
    assert banner.children == chart_panels.cap_banner(20, 63) and not banner.hidden
    table = report.mount_table(True, *[[] for _ in FILTERABLE], reference_id, None)
    assert len(find(table, "report-grid").rowData) == 63
    graph = find(page, "report-graph-throughput")
    assert sum(len(t["x"]) for t in graph.figure["data"]) == 20
    assert "20 of 63 cases in view charted" in texts(find(page, "report-aside-throughput"))

    out = report.refilter([], [], ["bf16"], [], [], [], [], [], reference_id, None,
                          DEFAULT_METRIC, None)
    named = dict(zip([f"{o.component_id}.{o.component_property}" for o in report.OUTPUTS],
                     out, strict=True))
    assert named["report-cap-banner.children"] == ""
    assert named["report-cap-banner.hidden"] is True  # 18 bf16 cases: all charted


def test_change_percent() -> None:
    assert comparison.Change(10.0, 11.0).percent == pytest.approx(10.0)
    assert comparison.Change(None, 1.0).percent is None
    assert comparison.change_text(comparison.Change(10.0, 11.0)) == "10 → 11 (+10.0 %)"


# --- against the database ----------------------------------------------------------------


def test_report_view_filters_and_qualifies_every_chart(
    session: Session, reference_id: int, settings_env: Callable[..., None]
) -> None:
    view = report_view.report_view(report_view.ReportCache(), session, reference_id, CaseFilter())
    assert len(view.cases) == 63 and view.count_text == "63 of 63 cases in view"
    assert [p.key for p in view.panels] == [c.key for c in figures.CHARTS]
    notes = {p.key: [n.key for n in p.notes] for p in view.panels}
    assert notes["percent-of-peak"] == ["peakNote", "timingNote", "placementNote"]
    assert notes["nvlink"] == ["bandwidthNote", "placementNote"]
    assert notes["memory"] == ["memoryNote", "placementNote"]
    assert view.panels[0].caveats == cases_repo.caveat_counts(session, reference_id)

    bf16_ep8 = report_view.report_view(report_view.ReportCache(), session, reference_id,
                                       CaseFilter(precision=["bf16"], ep=[8]))
    assert {(c.precision, c.ep) for c in bf16_ep8.cases} == {("bf16", 8)}
    assert all("placementNote" not in [n.key for n in p.notes] for p in bf16_ep8.panels)
    assert filters.search_from_filters(bf16_ep8.filters) == "?ep=8&precision=bf16"
    assert [r["id"] for r in bf16_ep8.rows] == [c.id for c in bf16_ep8.cases]
    first = case_service.get_case(session, reference_id, bf16_ep8.cases[0].id)
    row = bf16_ep8.rows[0]
    assert set(row) == {name for name, _ in case_table.TABLE_COLUMNS
                        if first.get(name) is not None}  # no empty field, no link
    assert row["caveats"] == " ".join(c["code"] for c in first["caveats"])
    assert row["usefulTFPerGPU"] == pytest.approx(first["usefulTFPerGPU"], rel=1e-5)
    assert row["id"] == first["id"] and row["ep"] == 8


def test_cached_report_follows_appends_and_filters_as_sql_does(
    session: Session, reference: dict[str, Any]
) -> None:
    first = copy.deepcopy(reference)
    first["cases"] = reference["cases"][:40]
    rid = ingest(session, first)
    reports = report_view.ReportCache()
    view = report_view.report_view(reports, session, rid, CaseFilter())
    assert len(view.cases) == len(view.rows) == 40 and view.header.case_count == 40

    rest = reference["cases"][40:]
    report = validate_report({**reference, "cases": rest})
    report_service.append_cases(session, rid, rest, report.cases)
    session.commit()
    after = report_view.report_view(reports, session, rid, CaseFilter())
    assert after.header.case_count == 63 and after.count_text == "63 of 63 cases in view"
    assert after.cases == views(case_service.view_cases(session, rid, CaseFilter()))
    assert [r["id"] for r in after.rows] == [c["id"] for c in reference["cases"]]
    for chosen in (CaseFilter(precision=["bf16"]), CaseFilter(mode=["training"], ep=[8, 64]),
                   CaseFilter(imbalance=[4.0], F=[3072, 6144]), CaseFilter(pipeline=["x"])):
        view = report_view.report_view(reports, session, rid, chosen)
        # The cases that pass, picked here from the JSON: every chosen field one of its values.
        wanted = [c["id"] for c in reference["cases"]
                  if all(c[f.wire] in values for f, values in chosen.active())]
        assert [c.id for c in view.cases] == wanted, chosen
        assert view.count_text == f"{len(wanted)} of 63 cases in view"
        assert view.cases == views(case_service.view_cases(session, rid, chosen)), chosen
    # By hand from the reference: 18 bf16 cases; training at EP 64 only of EP 8 and 64 (18).
    assert sum(c["precision"] == "bf16" for c in reference["cases"]) == 18


def test_the_cache_hands_out_read_only_reports(session: Session, reference_id: int) -> None:
    reports = report_view.ReportCache()
    view = report_view.report_view(reports, session, reference_id, CaseFilter())
    case = view.cases[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        case.layerMS = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        case.windows["combined"] = ()  # type: ignore[index]  # nested values are read-only
    with pytest.raises(AttributeError):
        case.windows["combined"].append(1.0)  # type: ignore[attr-defined]  # a tuple
    with pytest.raises(TypeError):
        view.meta["gpu"] = "other"  # type: ignore[index]
    with pytest.raises(TypeError):
        view.header.shape["T"] = 1  # type: ignore[index]
    # The rows a view hands on (to the browser) are its own: changing one changes no other
    # view's, nor the cached report.
    view.rows[0]["layerMS"] = -1.0
    again = report_view.report_view(reports, session, reference_id, CaseFilter())
    assert again.rows[0]["layerMS"] == pytest.approx(case.layerMS, rel=1e-5)
    assert reports.report(session, reference_id) is reports.report(session, reference_id)


def test_view_cases_are_what_the_api_serves(session: Session, reference_id: int) -> None:
    rows, _ = cases_repo.list_cases(session, reference_id)
    assert (case_service.view_cases(session, reference_id, CaseFilter())
            == case_service.cases_out(session, reference_id, rows))
    some = case_service.view_cases(session, reference_id, CaseFilter(mode=["training"], ep=[64]))
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
    rows = report_list.report_list(session)
    assert [r["id"] for r in rows] == [second, first]
    assert rows[0]["caseCount"] == 63 and rows[0]["bestPercentOfPeak"] is not None
    assert rows[0]["runId"] == (reference["meta"].get("runId") or "")
    listed = texts(pages["reports"].reports_table(rows))
    assert f"#{second}" in listed and f"#{first}" in listed
    found = pages["reports"].search("other gpu")
    assert "Other GPU <b>bold</b>" in texts(found) and reference["meta"]["gpu"] not in texts(found)
    assert "No report matches the search." in texts(pages["reports"].search("nothing-like-it"))


def _walk(component: Any) -> list[Any]:
    """Every component in a Dash component tree."""
    if isinstance(component, list | tuple):
        return [c for child in component for c in _walk(child)]
    if isinstance(component, Component):
        return [component, *_walk(getattr(component, "children", None))]
    return []


def test_reports_page_reaches_every_report(
    session: Session, reference: dict[str, Any], pages: dict[str, ModuleType],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ids = []
    for i in range(5):
        body = copy.deepcopy(reference)
        body["meta"]["runId"] = f"paged-{i}"
        ids.append(ingest(session, body))
    reports = pages["reports"]
    monkeypatch.setattr(reports, "PER_PAGE", 2)
    newest_first = ids[::-1]
    for page, want in ((1, newest_first[:2]), (2, newest_first[2:4]), (3, newest_first[4:])):
        shown = reports.layout(page=str(page))
        listed = [t for t in texts(find(shown, "reports-table")) if t.startswith("#")]
        assert listed == [f"#{i}" for i in want]
        first = (page - 1) * 2 + 1
        assert find(shown, "reports-count").children == (
            f"reports {first:,}–{min(5, page * 2):,} of 5")
    # The middle page links to every other one; the search keeps its words in the links.
    middle = reports.layout(page="2", q="paged")
    hrefs = [c.href for c in _walk(middle) if getattr(c, "href", None)]
    assert {"/?q=paged", "/?q=paged&page=3"} <= set(hrefs)
    assert find(reports.layout(page="9"), "reports-count").children == "5 reports; no page 9"


def test_report_page_and_filter_callback(
    reference_id: int, reference: dict[str, Any], pages: dict[str, ModuleType]
) -> None:
    report = pages["report"]
    page = report.layout(str(reference_id), precision="nvfp4")
    assert find(page, "report-count").children == "9 of 63 cases in view"
    assert find(page, "report-filter-precision").value == ["nvfp4"]
    graph = find(page, "report-graph-throughput")
    assert sum(len(t["x"]) for t in graph.figure["data"]) == 9
    # One legend for the page, of the styles in view; none on the charts.
    legend = texts(find(page, "report-legend"))
    assert "nvfp4" in legend and "bf16" not in legend
    pipelines = {c["pipeline"] for c in reference["cases"]}
    shown = {c["pipeline"] for c in reference["cases"] if c["precision"] == "nvfp4"}
    assert shown and shown <= set(legend) and not (pipelines - shown) & set(legend)
    for chart in figures.CHARTS:
        # The phases chart keeps its own legend: of phases, which the page's does not name.
        legend = find(page, f"report-graph-{chart.key}").figure["layout"].get("showlegend")
        assert legend is False or chart.key == "phases", chart.key
    assert find(page, "report-json-link").href == f"/api/v1/reports/{reference_id}/report.json"
    export = f"/api/v1/reports/{reference_id}/export.html"
    assert find(page, "report-export-link").href == export + "?precision=nvfp4"

    values = [[], [], ["bf16"], [], [], [], [], []]
    out = report.refilter(*values, reference_id, None, DEFAULT_METRIC, None)
    assert len(out) == len(report.OUTPUTS)
    named = dict(zip([f"{o.component_id}.{o.component_property}" for o in report.OUTPUTS],
                     out, strict=True))
    throughput = named["report-figures.data"]["throughput"]
    assert sum(len(t["x"]) for t in throughput["data"]) == 18
    assert named["report-count.children"] == "18 of 63 cases in view"
    assert named["report-search.data"] == "?precision=bf16"
    assert named["report-export-link.href"] == export + "?precision=bf16"
    # The export link opens the file on the matrix metric the page shows.
    named_pct = dict(zip([f"{o.component_id}.{o.component_property}" for o in report.OUTPUTS],
                         report.refilter(*values, reference_id, None, "percentOfPeak", None),
                         strict=True))
    assert named_pct["report-export-link.href"] == \
        export + "?precision=bf16&matrixMetric=percentOfPeak"
    _, href = report.rematrix("layerMS", *values, reference_id)
    assert href == export + "?precision=bf16&matrixMetric=layerMS"
    assert named["report-cap-banner.hidden"] is True  # every case charted: no banner
    legend = texts(named["report-legend.children"])
    assert "bf16" in legend and "nvfp4" not in legend

    # The table, built once the charts are drawn: its CSV button and the view's rows, each
    # case with its mark against history; a filter's rows when the table asks for them.
    exact = {c["id"]: c for c in reference["cases"]}
    bf16 = [c["id"] for c in reference["cases"] if c["precision"] == "bf16"]
    marks = ReportMarks({bf16[0]: CaseMark("regression", "/history?caseId=x", 12.5)}, 1,
                        Settings()).store()
    table = report.mount_table(True, *values, reference_id, marks)
    assert find(table, "report-csv-button").children == "Download CSV of the rows in view"
    view = find(table, "report-grid").rowData
    assert [r["id"] for r in view] == bf16 and len(view) == 18
    assert view[0]["historyChange"] == 12.5 and "historyChange" not in view[1]
    assert view[1]["layerMS"] == pytest.approx(exact[bf16[1]]["layerMS"], rel=1e-5)
    history = ("historyChange", "historyStatus", "historyHref")
    assert report.table_rows({"at": 1}, *values, reference_id, None) == [
        {k: v for k, v in r.items() if k not in history} for r in view]
    # The CSV: the rows the grid shows (its own filter and sort over the view's rows), in
    # its order, with exact values.
    shown = list(reversed(view))[:5]
    download = report.download_csv(1, shown, view, *values, reference_id)
    parsed = list(csv.DictReader(io.StringIO(download["content"])))
    assert [r["id"] for r in parsed] == [r["id"] for r in shown]
    assert all(float(r["usefulTFPerGPU"]) == exact[r["id"]]["usefulTFPerGPU"] for r in parsed)
    # A table still holding the view before the filter (it takes the new rows when it comes
    # near the window): the CSV is the view's rows, not the table's.
    earlier = [{"id": c["id"]} for c in reference["cases"]]
    download = report.download_csv(1, earlier[:7], earlier, *values, reference_id)
    parsed = list(csv.DictReader(io.StringIO(download["content"])))
    assert [r["id"] for r in parsed] == bf16
    assert "Not found" in texts(report.layout("12345"))
    assert "Not found" in texts(report.layout("abc"))


def test_every_note_is_shown_as_text(
    session: Session, reference: dict[str, Any], pages: dict[str, ModuleType]
) -> None:
    reference["meta"]["peakNote"] = SCRIPT_NOTE
    reference["meta"]["customNote"] = "a note the dashboard does not know"
    rid = ingest(session, reference)
    page = pages["report"].layout(str(rid))
    panel = find(page, "report-notes")
    # Every *Note of the meta, each once, in the meta's order, its text verbatim: the list
    # made here from the JSON.
    wanted = [(k, v) for k, v in reference["meta"].items()
              if k.endswith("Note") and isinstance(v, str)]
    assert len(wanted) >= 3 and ("customNote", "a note the dashboard does not know") in wanted
    shown = [(texts(block)[0], block) for block in panel.children[1:]]
    assert [key for key, _ in shown] == [k for k, _ in wanted]
    for (key, block), (_, text) in zip(shown, wanted, strict=True):
        assert text in texts(block), key
    # The peak note qualifies the % of peak chart: shown beside it as text (a script would
    # be markup, not text).
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


def test_a_case_size_never_measured_draws_no_bar(reference: dict[str, Any]) -> None:
    case = {**reference["cases"][0], "slotBytes": None, "hostScratchBytes": 0}
    bar = figures.case_memory_spec(view(case))["data"][0]
    sizes = dict(zip(bar["x"], bar["y"], strict=True))
    assert sizes["arena slot"] is None and sizes["host scratch"] == 0


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

    result = comparison.compare_reports(session, base, head)
    assert result.only_base == [gone["id"]] and result.only_head == ["new-case"]
    by_id = {r.case_id: r for r in result.rows}
    assert len(by_id) == 62
    # Two reports of one series, no history of 3 points: judged against the base alone,
    # with the larger window spread as the noise.
    assert {r.basis for r in result.rows} == {"pair"}
    assert by_id[slower["id"]].verdict.status == "regression"
    assert by_id[slower["id"]].changes["layerMS"].percent == pytest.approx(10.0)
    # The verdict is the layer time's: a throughput edited alone moves no verdict.
    assert by_id[faster["id"]].verdict.status == "unchanged"
    assert by_id[faster["id"]].changes["usefulTFPerGPU"].percent == pytest.approx(20.0)
    assert by_id[reference["cases"][5]["id"]].verdict.status == "unchanged"

    view, search = pages["compare"].choose(base, head)
    assert search == f"?base={base}&head={head}"
    assert ("62 matched cases: 1 regression, 0 improvements, 61 unchanged, 0 with too "
            "little history; judged each case against the base alone (threshold and the two "
            "runs' window spread), past 5 % and past the noise.") in texts(view)
    assert texts(find(view, "compare-groups")) == [
        f"1 inference bf16 standard single_layer EP8 F3072 i1 case: "
        f"{by_id[slower['id']].verdict.change_percent:+.1f} % (regression)"]
    assert find(view, "compare-ratio").figure["layout"]["yaxis"]["type"] == "log"
    assert find(view, "compare-export-link").href == (
        f"/api/v1/compare/export.html?base={base}&head={head}")
    # Without ids: the newest report against the previous report of its series.
    default = pages["compare"].layout()
    assert find(default, "compare-base").value == base
    assert find(default, "compare-head").value == head

    # The pickers tell the runs apart; a report that does not exist is named, not dropped.
    labels = [o["label"] for o in report_list.report_options(session)]
    assert any(label.startswith(f"#{head} ") and "· head" in label for label in labels)
    page = pages["compare"].layout(str(base), "999999")
    assert find(page, "compare-missing").children == "head report 999999 does not exist"
    assert find(pages["compare"].layout(str(base), str(head)), "compare-missing") is None
    assert texts(find(page, "compare-head")) == [] and find(page, "compare-head").value is None
    assert texts(find(pages["report"].layout(str(head)), "report-run-id")) == ["run ", "head"]
    assert find(pages["report"].layout(str(base)), "report-run-id") is None  # no runId


@pytest.fixture
def app_client(settings_env: Callable[..., None], engine: Any) -> Iterator[TestClient]:
    with TestClient(create_app()) as client:
        yield client


def test_dashboard_is_served_at_the_root_beside_the_api(
    app_client: TestClient, auth: Callable[[str], dict[str, str]], reference: dict[str, Any]
) -> None:
    index = app_client.get("/")
    assert index.status_code == 200 and "_dash-renderer" in index.text
    # The very first page after start-up already has our assets and the router's script.
    assert "/assets/dashAgGridComponentFunctions.js" in index.text
    assert "document.title = data.title" in index.text
    # The assets are the files in static/, byte for byte.
    static = Path(__file__).resolve().parents[1] / "static"
    for name in ("style.css", "dashAgGridComponentFunctions.js"):
        assert app_client.get(f"/assets/{name}").content == (static / name).read_bytes()
    assert app_client.get("/docs").status_code == 200
    assert app_client.get("/api/v1/reports").json()["total"] == 0
    # A report posted to the API is what the dashboard's routes and the API then serve.
    posted = app_client.post("/api/v1/reports", json=reference, headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    rid = posted.json()["id"]
    assert app_client.get(f"/reports/{rid}").status_code == 200
    listed = app_client.get("/api/v1/reports").json()
    assert listed["total"] == 1 and listed["items"][0]["caseCount"] == len(reference["cases"])
    training = app_client.get(f"/api/v1/reports/{rid}/cases", params={"mode": "training"})
    assert [c["id"] for c in training.json()["items"]] == [
        c["id"] for c in reference["cases"] if c["mode"] == "training"]
    missing = app_client.get("/api/v1/no-such-route")
    assert missing.status_code == 404 and missing.json()["error"]


def test_the_case_tables_numbers_use_the_digit_keeping_formatter(
        pages: dict[str, ModuleType]) -> None:
    """d3's ',.4~g' showed F=12288 as 1.229e+4; static/'s caseNumber keeps the digits
    (tested in the browser: test_the_case_tables_numbers_keep_their_digits)."""
    from app.case_fields import TABLED
    from app.dashboard.case_grid import COLUMN_DEFS

    numeric = {f.wire for f in TABLED if f.kind in (int, float)}
    formatted = {c["field"] for c in COLUMN_DEFS
                 if c.get("valueFormatter") == {"function": "caseNumber(params.value)"}}
    assert numeric >= {"ep", "F", "usefulTFPerGPU", "layerMS"} and formatted == numeric


# moescope's runner's additions to a case (docs/wire-format.md): dyadic values, exact in JSON.
RUNNER_FIELDS: dict[str, Any] = {
    "phaseMS": {"dispatch": 0.21875, "experts": 1.3125, "combine": 0.40625},
    "dispatchGBps": 612.5, "combineGBps": 587.25,
    "gpuState": {"smClockMinMHz": 1755.0, "smClockMaxMHz": 1980.0, "powerMaxW": 688.5,
                 "temperatureMaxC": 71.0, "throttleReasons": 8,
                 "throttleReasonNames": ["hw_slowdown"], "samples": 42},
    "gpuStateReason": None,
}


def test_runner_fields_round_trip_and_show_on_the_case_page(
    client: TestClient, auth: Callable[[str], dict[str, str]], reference: dict[str, Any],
    pages: dict[str, ModuleType]
) -> None:
    body = copy.deepcopy(reference)
    body["cases"] = body["cases"][:2]
    body["cases"][0].update(copy.deepcopy(RUNNER_FIELDS))
    body["cases"][1].update(phaseMS=None, gpuState=None, gpuStateReason="no GPU: no NVML",
                            failure="rank 1, experts phase: RuntimeError: shape rejected")
    posted = client.post("/api/v1/reports", json=body, headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    rid = posted.json()["id"]
    case_id = body["cases"][0]["id"]
    served = client.get(f"/api/v1/reports/{rid}/cases/{case_id}").json()
    assert {k: served[k] for k in RUNNER_FIELDS} == RUNNER_FIELDS
    assert "throttled" in {c["code"] for c in served["caveats"]}
    assert client.get(f"/api/v1/reports/{rid}/report.json").json() == body

    page = pages["case"].layout(str(rid), case_id)
    shown = texts(find(page, "case-fields"))
    for key in RUNNER_FIELDS:
        assert key in shown, key
    # In their units: GB/s, and the GPU state in words.
    assert "612.5 GB/s" in shown and any("throttle: hw_slowdown" in t for t in shown)
    assert "SM clock 1755–1980 MHz, power ≤ 688 W, ≤ 71 °C, throttle: hw_slowdown " \
        "(42 samples)" in shown
    bars = find(page, "case-graph-phases").figure["data"][0]
    assert list(bars["x"]) == ["dispatch", "experts", "combine", "layer (forward)"]
    assert list(bars["y"])[:3] == [0.21875, 1.3125, 0.40625]
    other = pages["case"].layout(str(rid), body["cases"][1]["id"])
    assert {"no GPU: no NVML", "failure", "rank 1, experts phase: RuntimeError: shape "
            "rejected"} <= set(texts(find(other, "case-fields")))
    assert "failed" in texts(find(other, "case-caveats"))

    report = find(pages["report"].layout(str(rid)), "report-graph-phases").figure
    stacked = {t["name"]: list(t["y"]) for t in report["data"] if t.get("yaxis") != "y2"}
    assert stacked == {"dispatch": [0.21875, None], "experts": [1.3125, None],
                       "combine": [0.40625, None]}


def test_page_texts_read_the_regression_settings_they_describe() -> None:
    """The numbers in the words come from the settings that judged (and the module's
    defaults), not from copies typed into the text."""
    from app.dashboard.moved_cases import moved_cases_section
    from app.figures import verdict_text
    from app.services.against_history import ReportMarks, against_history
    from ingest.regressions import MIN_BASELINE_POINTS, Settings

    unjudged = ReportMarks({}, 0, Settings(min_points=7))
    assert "No case has 7 earlier reports" in " ".join(texts(
        moved_cases_section(against_history(unjudged, []))))
    point = {"status": "insufficient_history", "baselinePoints": 1}
    assert verdict_text(point) == f"fewer than {MIN_BASELINE_POINTS} earlier points (1)"


def test_report_page_opens_on_the_matrix_metric_in_its_url(
    reference_id: int, reference: dict[str, Any], pages: dict[str, ModuleType]
) -> None:
    report = pages["report"]
    page = report.layout(str(reference_id), matrixMetric="percentOfPeak")
    assert find(page, "report-matrix-metric").value == "percentOfPeak"
    # The first bf16 cell's % of peak, by hand: useful TF / the bf16 peak 2500, one digit.
    first = next(c for c in reference["cases"] if c["precision"] == "bf16")
    expected = f"{first['usefulTFPerGPU'] / 2500 * 100:,.1f}"
    assert any(t.endswith(expected) for t in texts(find(page, "report-matrix-table")))
    assert find(page, "report-url-problems").hidden is True
    page = report.layout(str(reference_id), matrixMetric="speed")
    assert find(page, "report-matrix-metric").value == DEFAULT_METRIC
    problems = " ".join(texts(find(page, "report-url-problems")))
    assert "matrixMetric='speed'" in problems and "percentOfPeak" in problems
