"""The regressions endpoint's attribution and groups, and ``moescope regressions --format
markdown`` / ``--fail-on``, on SQLite and Postgres, over a series whose newest report has its
nine nvfp4 mega cases 18 % slower, all of it in the combine phase."""

from __future__ import annotations

import importlib
import statistics
from pathlib import Path
from typing import Any

import pytest
from api_helpers import REPORTS
from compare_helpers import combine_slowed, series, slow_down
from conftest import live_server
from fastapi.testclient import TestClient
from history_helpers import ingest
from page_helpers import texts
from sqlalchemy.orm import Session

from app.main import create_app
from app.services import history_view
from cli.main import main
from cli.regressions_markdown import md

Body = dict[str, Any]


def test_the_endpoint_attributes_each_case_against_its_baseline_phases(
    client: TestClient, session: Session, reference: Body
) -> None:
    bodies, slowed = combine_slowed(reference)
    ids = [ingest(session, b) for b in bodies]
    body = client.get(f"{REPORTS}/{ids[-1]}/regressions").json()
    items = {item["caseId"]: item for item in body["items"]}
    assert set(items) == set(slowed)
    for case_id, item in items.items():
        earlier = [next(c for c in b["cases"] if c["id"] == case_id) for b in bodies[:-1]]
        newest = next(c for c in bodies[-1]["cases"] if c["id"] == case_id)
        baseline = statistics.median(c["phaseMS"]["combine"] for c in earlier)
        attribution = item["attribution"]
        assert attribution["topPhase"] == "combine"
        combine = attribution["phases"][0]
        assert combine["baseMS"] == pytest.approx(baseline)
        assert combine["changePercent"] == pytest.approx(
            (newest["phaseMS"]["combine"] - baseline) / baseline * 100)
        assert attribution["gpuState"] == []
    [group] = body["groups"]
    changes = [items[c]["changePercent"] for c in slowed]
    assert sorted(group["caseIds"]) == sorted(slowed)
    assert group["label"] == "inference nvfp4 mega"
    assert group["text"] == (f"9 inference nvfp4 mega cases: {min(changes):+.1f} % to "
                             f"{max(changes):+.1f} % (regression)")
    assert body["previousReportId"] == ids[-2]


def _combine_percent(bodies: list[Body], case_id: str) -> float:
    earlier = [next(c for c in b["cases"] if c["id"] == case_id)["phaseMS"]["combine"]
               for b in bodies[:-1]]
    newest = next(c for c in bodies[-1]["cases"] if c["id"] == case_id)["phaseMS"]["combine"]
    return (newest - statistics.median(earlier)) / statistics.median(earlier) * 100


def test_markdown_summary_and_fail_on(
    session: Session, reference: Body, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bodies, slowed = combine_slowed(reference)
    ids = [ingest(session, b) for b in bodies]
    db = ["--database-url", database_url]
    assert main(["regressions", str(ids[-1]), "--format", "markdown", "--base-url",
                 "https://moescope.example/", *db]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"### moescope: report {ids[-1]} against its history\n")
    assert "**9 regression(s), 0 improvement(s)** of 63 cases" in out
    group_rows = [line for line in out.splitlines() if line.startswith("| regression | 9 ")]
    assert len(group_rows) == 1 and "9 inference nvfp4 mega cases |" in group_rows[0]
    # The group names its phase: each case's combine against its earlier reports' median.
    combine = [_combine_percent(bodies, case_id) for case_id in slowed]
    assert group_rows[0].endswith(
        f"| all in combine ({min(combine):+.0f} % to {max(combine):+.0f} %) |")
    case_rows = [line for line in out.splitlines() if line.startswith("| regression | [")]
    assert len(case_rows) == 9
    assert all("| combine +" in row for row in case_rows)
    assert all("](https://moescope.example/history?caseId=" in row for row in case_rows)
    assert (f"[compare with report {ids[-2]}](https://moescope.example/compare?base={ids[-2]}"
            f"&head={ids[-1]})") in out

    assert main(["regressions", str(ids[-1]), "--fail-on", "none", *db]) == 0
    text = capsys.readouterr().out
    assert "9 inference nvfp4 mega cases:" in text and "why: combine +" in text
    # No base URL: names without links.
    assert main(["regressions", str(ids[-1]), "--format", "markdown", *db]) == 1
    assert "](" not in capsys.readouterr().out


def test_fail_on_any_fails_on_an_improvement(
    session: Session, reference: Body, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bodies = series(reference)
    case = bodies[-1]["cases"][7]
    factor = 0.8
    case["layerMS"] *= factor
    case["forwardMS"] *= factor
    case["windows"] = {k: [w * factor for w in ws] for k, ws in case["windows"].items()}
    ids = [ingest(session, b) for b in bodies]
    db = ["--database-url", database_url]
    assert main(["regressions", str(ids[-1]), *db]) == 0
    assert main(["regressions", str(ids[-1]), "--fail-on", "any", *db]) == 1
    assert "| improvement |" in (main(["regressions", str(ids[-1]), "--format", "markdown",
                                       *db]), capsys.readouterr().out)[1]


def test_markdown_escapes_a_reports_strings() -> None:
    assert md("a|b <img src=x> [x](y) *z*") == r"a\|b \<img src=x\> \[x\](y) \*z\*"


def test_a_live_server_gives_the_same_markdown(
    session: Session, reference: Body, database_url: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bodies, _ = combine_slowed(reference)
    report = str([ingest(session, b) for b in bodies][-1])
    shown = ["--format", "markdown", "--base-url", "https://moescope.example"]
    assert main(["regressions", report, *shown, "--database-url", database_url]) == 1
    from_database = capsys.readouterr().out
    with live_server(database_url, tmp_path) as server:
        assert main(["regressions", report, *shown, "--url", server.url]) == 1
        assert capsys.readouterr().out == from_database
        assert main(["regressions", report, "--fail-on", "none", "--url", server.url]) == 0


def test_the_history_page_says_why_its_newest_point_moved(
    client: TestClient, session: Session, reference: Body, settings_env: Any
) -> None:
    bodies, slowed = combine_slowed(reference)
    ids = [ingest(session, b) for b in bodies]
    case_id, gpu = slowed[0], reference["meta"]["gpu"]
    earlier = [next(c for c in b["cases"] if c["id"] == case_id) for b in bodies[:-1]]
    newest = next(c for c in bodies[-1]["cases"] if c["id"] == case_id)
    base = statistics.median(c["phaseMS"]["combine"] for c in earlier)
    combine = round((newest["phaseMS"]["combine"] - base) / base * 100)
    assert combine >= 18  # the whole 18 % of the layer time is in a third of it

    view = history_view.history_view(session, [case_id], gpu, None)
    latest = view.latest
    assert latest is not None and latest["reportId"] == ids[-1]
    assert latest["status"] == "regression"
    # The regressions endpoint's words for the same report and case.
    endpoint = client.get(f"{REPORTS}/{ids[-1]}/regressions").json()
    why = next(i for i in endpoint["items"] if i["caseId"] == case_id)["attribution"]["text"]
    assert latest["why"] == why and why.startswith(f"combine +{combine} %")
    assert all("why" not in p for p in view.points[:-1])  # unflagged: nothing to explain
    # The flagged point's hover on the chart carries it too.
    line = next(t for t in view.specs["layer-time"]["data"] if t.get("name") == "this case")
    assert f"why: combine +{combine} %" in line["customdata"][-1]
    create_app()  # the page registers itself once the Dash app exists
    page = importlib.import_module("app.dashboard.pages.history")
    shown = " ".join(texts(page.layout(caseId=case_id, gpu=gpu)))
    assert f"why: {why}" in shown


def test_the_history_page_names_a_clock_drop(session: Session, reference: Body) -> None:
    bodies = series(reference)
    case = bodies[-1]["cases"][3]
    slow_down(case, 0.2 * case["layerMS"])  # slower, its phases as they were
    case["gpuState"]["smClockMinMHz"] = 1410.0
    ids = [ingest(session, b) for b in bodies]
    view = history_view.history_view(session, [case["id"]], reference["meta"]["gpu"], None)
    latest = view.latest
    assert latest is not None and latest["reportId"] == ids[-1]
    assert latest["status"] == "regression"
    drop = round((1410 - 1965) / 1965 * 100)
    assert latest["why"].endswith(f"; SM clock min 1965 -> 1410 MHz ({drop:+d} %)")
