"""The report page's host and software line, its "compare with previous" link (and the
reports list's), and its moved-cases list grouped and following the page's filter."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from compare_helpers import HOST, combine_slowed, series, slow_down
from export_helpers import parse
from history_helpers import ingest
from page_helpers import find, pages, texts  # noqa: F401 - pages is a fixture
from sqlalchemy.orm import Session

from app.case_fields import FILTERABLE, CaseFilter
from app.export.service import export_report
from app.matrix_metrics import DEFAULT_METRIC
from app.services.host_facts import host_facts

Body = dict[str, Any]


def test_host_and_software_and_compare_with_previous(
    session: Session, reference: Body, pages: dict[str, ModuleType]  # noqa: F811
) -> None:
    bodies = series(reference, 2)
    bodies[1]["meta"]["host"]["driver"] = None  # NVML could not say
    ids = [ingest(session, b) for b in bodies]
    other_shape = {**reference["meta"], "shape": {**reference["meta"]["shape"], "T": 4096}}
    lone = ingest(session, {"meta": other_shape, "cases": reference["cases"][:3]})

    first = pages["report"].layout(str(ids[0]))
    line = " ".join(texts(find(first, "report-provenance")))
    for label, key in (("host", "hostname"), ("driver", "driver"), ("CUDA", "cuda"),
                       ("torch", "torch"), ("NCCL", "nccl"), ("world size", "worldSize")):
        assert f"{label}  {HOST[key]}" in line or f"{label} {HOST[key]}" in line, line
    assert "first report of its series" in line

    second = pages["report"].layout(str(ids[1]))
    assert "driver  unknown" in " ".join(texts(find(second, "report-provenance")))
    link = find(second, "report-compare-previous")
    assert link.href == f"/compare?base={ids[0]}&head={ids[1]}"
    # The reference has no meta.host: said, not left blank.
    assert "host and software not reported" in " ".join(
        texts(find(pages["report"].layout(str(lone)), "report-provenance")))
    assert host_facts({"host": {"zeta": 1, "torch": "2.13"}}) == (("torch", "2.13"),
                                                                  ("zeta", "1"))

    # The reports list links each report to its series' previous one, and only that.
    table = find(pages["reports"].layout(), "reports-table")
    rows = {texts(row.children[0])[0]: row.children[-1].children
            for row in table.children[1].children}
    assert rows[f"#{ids[1]}"].href == f"/compare?base={ids[0]}&head={ids[1]}"
    assert rows[f"#{ids[0]}"] == "" and rows[f"#{lone}"] == ""


def test_moved_cases_are_grouped_and_follow_the_filter(
    session: Session, reference: Body, pages: dict[str, ModuleType]  # noqa: F811
) -> None:
    bodies, slowed = combine_slowed(reference)
    bf16 = next(c for c in bodies[-1]["cases"] if c["precision"] == "bf16")
    slow_down(bf16, 0.3 * bf16["layerMS"])
    ids = [ingest(session, b) for b in bodies]

    page = pages["report"].layout(str(ids[-1]))
    groups = texts(find(page, "report-moved-groups"))
    assert len(groups) == 2 and groups[0].startswith("9 inference nvfp4 mega cases: +")
    assert groups[1].startswith(f"1 {bf16['mode']} bf16 standard")
    assert find(page, "report-moved-in-view") is None  # every moved case is in view
    # Each moved case names its phase: combine for the nine, none moved alone for the bf16
    # case (slowed as a whole, its phases as they were).
    rows = find(page, "report-moved-list").children[-1].children[1].children
    why = {texts(r.children[1])[0]: texts(r.children[-1])[0] for r in rows}
    assert all(why[c].startswith("combine +") for c in slowed)
    assert not why[bf16["id"]].startswith("combine")

    # Filtered to bf16: the list shows the bf16 case alone, and says the others exist.
    filtered = pages["report"].layout(str(ids[-1]), precision="bf16")
    listed = find(filtered, "report-moved-list")
    assert texts(find(listed, "report-moved-in-view")) == [
        "1 of the 10 moved cases are in view."]
    assert [t for t in texts(listed) if t in (bf16["id"], *slowed)] == [bf16["id"]]

    # The filter callback redraws the list from the store of marks alone.
    marks = find(page, "report-history-marks").data
    values = [["nvfp4"] if f.wire == "precision" else [] for f in FILTERABLE]
    out = pages["report"].refilter(*values, ids[-1], marks, DEFAULT_METRIC, None)
    moved_list = [o.component_id for o in pages["report"].OUTPUTS].index("report-moved-list")
    redrawn = out[moved_list]
    assert sorted(t for t in texts(redrawn) if t in slowed) == sorted(slowed)
    assert bf16["id"] not in texts(redrawn)


def test_the_export_groups_the_moved_cases_in_view(session: Session, reference: Body) -> None:
    bodies, slowed = combine_slowed(reference)
    ids = [ingest(session, b) for b in bodies]
    root = parse(export_report(session, ids[-1], CaseFilter()).html)
    [group] = [li.text for li in root.by_id("export-history-groups").find_all("li")]
    assert group.startswith("9 inference nvfp4 mega cases: +") and group.endswith("(regression)")
    # A view without them: no group, no row.
    training = parse(export_report(session, ids[-1], CaseFilter(mode=["training"])).html)
    assert training.find_all(id="export-history-groups") == []
