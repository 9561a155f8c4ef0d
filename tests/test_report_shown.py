"""The report page's filter callback sends only the parts that differ from what the page
shows (app/dashboard/shown.py), on SQLite and Postgres, no server."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import dash
from history_helpers import ingest
from page_helpers import find, pages, texts  # noqa: F401 - pages is a fixture
from sqlalchemy.orm import Session

from app.case_fields import FILTERABLE
from app.dashboard import shown
from app.matrix_metrics import DEFAULT_METRIC

Body = dict[str, Any]


def test_changed_only_keeps_what_differs() -> None:
    page = shown.digests([1, "a", {"x": [1, 2]}])
    sent, now = shown.changed_only([1, "b", {"x": [1, 2]}], page)
    assert sent == [dash.no_update, "b", dash.no_update]
    assert now == shown.digests([1, "b", {"x": [1, 2]}]) and now[1] != page[1]
    # No digests, or digests of other outputs: everything goes.
    assert shown.changed_only([1, "b"], None)[0] == [1, "b"]
    assert shown.changed_only([1, "b"], page)[0] == [1, "b"]


def _values(**chosen: list[str]) -> list[list[str]]:
    return [chosen.get(f.wire, []) for f in FILTERABLE]


def test_the_callback_sends_what_changed_against_the_page(
    session: Session, reference: Body, pages: dict[str, ModuleType]  # noqa: F811
) -> None:
    report = pages["report"]
    rid = ingest(session, reference)
    page = report.layout(str(rid), precision="bf16")
    drawn = find(page, "report-shown").data
    names = [f"{o.component_id}.{o.component_property}" for o in report.OUTPUTS]

    # The filters the page was drawn with: nothing to send but the caveat list (always
    # sent) and the digests. (The table asks for its rows apart: table_rows.)
    same = dict(zip(names, report.refilter(*_values(precision=["bf16"]), rid, None,
                                           DEFAULT_METRIC, drawn), strict=True))
    assert [n for n, v in same.items() if v is not dash.no_update] == [
        "report-caveat-list.children", "report-shown.data"]
    assert same["report-figures.data"] is dash.no_update
    assert same["report-shown.data"] == drawn

    # Another precision: the charts, counts and rows go; each chart's notes (the view
    # still spans several EPs) and the hidden flags stay.
    nvfp4 = dict(zip(names, report.refilter(*_values(precision=["nvfp4"]), rid, None,
                                            DEFAULT_METRIC, drawn), strict=True))
    nine = sum(1 for c in reference["cases"] if c["precision"] == "nvfp4")
    assert nvfp4["report-count.children"] == f"{nine} of 63 cases in view"
    assert "report-rows.data" not in nvfp4
    figures = nvfp4["report-figures.data"]  # only the charts whose figure changed
    assert sum(len(t["x"]) for t in figures["throughput"]["data"]) == nine
    assert nvfp4["report-aside-throughput-drawn.children"] == [f"{nine} cases in view"]
    # The roofline's points are numbered 1..nine in view order; its key says which is which.
    drawn_line, key = nvfp4["report-aside-roofline-drawn.children"]
    assert drawn_line == f"{nine} cases in view"
    numbered = [(li.value, li.children) for li in key.children[1].children]
    assert numbered == [(str(i + 1), c["id"]) for i, c in enumerate(
        c for c in reference["cases"] if c["precision"] == "nvfp4")]
    assert nvfp4["report-aside-throughput-notes.children"] is dash.no_update
    assert nvfp4["report-chart-throughput.hidden"] is dash.no_update
    assert "nvfp4" in texts(nvfp4["report-legend.children"])
    # The parts sent are those whose digests changed, and only those.
    changed = [a != b for a, b in zip(drawn, nvfp4["report-shown.data"], strict=True)]
    sent = [f"report-figure-{key}.data" for key in figures] + [
        n for n in report.DIGESTED if n in nvfp4 and nvfp4[n] is not dash.no_update]
    assert sorted(sent) == sorted(n for n, c in zip(report.DIGESTED, changed, strict=True) if c)
