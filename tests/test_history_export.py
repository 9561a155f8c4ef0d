"""The HTML export's regressions section: present with the flagged cases in view once a
report has history, absent before; on SQLite and Postgres."""

from __future__ import annotations

from typing import Any

from export_helpers import parse, table_rows
from history_helpers import ingest, synthetic_series
from sqlalchemy.orm import Session

from app.case_fields import CaseFilter
from app.export.service import export_report

Body = dict[str, Any]


def test_export_has_a_regressions_section_once_history_exists(
    session: Session, reference: Body
) -> None:
    ids = [c["id"] for c in reference["cases"]]
    slowed, sped = ids[0], ids[36]  # an inference and a training case
    reports = synthetic_series(reference, 5, seed=4,
                               newest_factor={slowed: 1.15, sped: 0.88})
    report_ids = [ingest(session, r) for r in reports]

    root = parse(export_report(session, report_ids[-1], CaseFilter()).html)
    section = root.by_id("export-history")
    # The page's words: the report's moved cases of those judged (all 63 have 4 earlier).
    assert "2 of 63 cases judged moved past 5 %" in section.text
    rows = table_rows(root.by_id("export-history-flagged"))
    assert [(r[0], r[1]) for r in rows[1:]] == [("regression", slowed), ("improvement", sped)]
    assert rows[1][2].startswith("+1") and rows[2][2].startswith("-1")
    assert [r[4] for r in rows[1:]] == ["4", "4"]

    # In a view of the training cases only, the inference regression is not listed.
    training = parse(export_report(session, report_ids[-1],
                                   CaseFilter(mode=["training"])).html)
    assert [r[1] for r in table_rows(training.by_id("export-history-flagged"))[1:]] == [sped]
    assert training.by_id("export-history-in-view").text.strip() == (
        "1 of the 2 moved cases are in view.")

    # The third report has two earlier ones: nothing judged, so no section at all.
    early = parse(export_report(session, report_ids[2], CaseFilter()).html)
    assert early.find_all(id="export-history") == []
