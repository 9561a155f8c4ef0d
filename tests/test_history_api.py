"""GET /reports/{id}/regressions, GET /history and ``moescope regressions`` on SQLite and
Postgres, over a synthetic series with three cases slowed 15 % and one sped up 12 %."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from api_helpers import REPORTS, error_detail, problems
from conftest import live_server
from fastapi.testclient import TestClient
from history_helpers import ingest, synthetic_series
from sqlalchemy.orm import Session

from app.main import create_app
from cli.main import main

Body = dict[str, Any]


@pytest.fixture
def series(session: Session, reference: Body) -> tuple[list[Body], list[int], list[str]]:
    """Six reports; in the newest, cases 0, 20, 45 are 15 % slower and 36 12 % faster.
    Returns the reports, their ids and the moved cases (slowed first)."""
    ids = [c["id"] for c in reference["cases"]]
    moved = [ids[0], ids[20], ids[45], ids[36]]
    reports = synthetic_series(
        reference, 6, seed=1, newest_factor={**dict.fromkeys(moved[:3], 1.15), moved[3]: 0.88})
    return reports, [ingest(session, r) for r in reports], moved


def test_regressions_endpoint(client: TestClient, series: Any) -> None:
    reports, report_ids, moved = series
    body = client.get(f"{REPORTS}/{report_ids[-1]}/regressions").json()
    assert body["thresholdPercent"] == 5 and body["window"] == 20
    assert body["counts"] == {"regression": 3, "improvement": 1, "unchanged": 59,
                              "insufficient_history": 0}
    items = {item["caseId"]: item for item in body["items"]}
    assert list(items) == [c["id"] for c in reports[-1]["cases"] if c["id"] in moved]
    assert {c: i["kind"] for c, i in items.items()} == {
        **dict.fromkeys(moved[:3], "regression"), moved[3]: "improvement"}
    first = items[moved[0]]
    earlier = sorted(r["cases"][0]["layerMS"] for r in reports[:-1])
    newest = reports[-1]["cases"][0]["layerMS"]
    assert first["metric"] == "layerMS" and first["baselinePoints"] == 5
    assert first["baseline"] == pytest.approx(earlier[2])  # the median of five
    assert first["changePercent"] == pytest.approx((newest - earlier[2]) / earlier[2] * 100)
    assert first["historyUrl"].startswith(f"/history?caseId={moved[0]}&gpu=NVIDIA+Blackwell")

    # A threshold above every move flags nothing; too short a history flags nothing either.
    high = client.get(f"{REPORTS}/{report_ids[-1]}/regressions", params={"threshold": 40})
    assert high.json()["items"] == []
    early = client.get(f"{REPORTS}/{report_ids[2]}/regressions").json()
    assert early["items"] == [] and early["counts"]["insufficient_history"] == 63

    error_detail(client.get(f"{REPORTS}/999999/regressions"), 404, "not_found")
    assert problems(client.get(f"{REPORTS}/{report_ids[-1]}/regressions",
                               params={"threshold": 0})) == [
        ("threshold", "Input should be greater than 0")]


def test_history_endpoint(client: TestClient, series: Any, reference: Body) -> None:
    reports, report_ids, moved = series
    gpu = reference["meta"]["gpu"]
    response = client.get("/api/v1/history", params={"caseId": moved[0], "gpu": gpu})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["seriesFields"] == {"gpu": gpu, "T": 2048, "D": 7168, "E": 384, "K": 6}
    assert body["otherSeries"] == []
    points = body["points"]
    assert [p["reportId"] for p in points] == report_ids
    assert [p["date"] for p in points] == [r["meta"]["date"] for r in reports]
    for point, report in zip(points, reports, strict=True):
        case = report["cases"][0]
        assert point["layerMS"] == case["layerMS"]
        assert point["windowMinMS"] == min(case["windows"]["combined"])
        assert point["windowMaxMS"] == max(case["windows"]["combined"])
        assert point["usefulTFPerGPU"] == case["usefulTFPerGPU"]
        assert point["percentOfPeak"] == pytest.approx(case["usefulTFPerGPU"] / 2500 * 100)
    assert [p["status"] for p in points] == ["insufficient_history"] * 3 + [
        "unchanged", "unchanged", "regression"]

    error_detail(client.get("/api/v1/history", params={"caseId": "nope", "gpu": gpu}),
                 404, "not_found")
    assert ("gpu", "Field required") in problems(
        client.get("/api/v1/history", params={"caseId": moved[0]}))


def test_cli_exit_codes(series: Any, database_url: str,
                        capsys: pytest.CaptureFixture[str]) -> None:
    _, report_ids, moved = series
    db = ["--database-url", database_url]
    assert main(["regressions", str(report_ids[-1]), *db]) == 1
    out, err = capsys.readouterr()
    # The slowed case's line: its kind and a change of 15 % give or take the noise.
    assert re.search(rf"regression +\+1\d\.\d %  {re.escape(moved[0])} ", out), out
    assert "3 regression(s), 1 improvement(s), 59 unchanged" in err

    assert main(["regressions", str(report_ids[-1]), "--json", *db]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted((x["caseId"], x["kind"]) for x in lines) == sorted(
        [(c, "regression") for c in moved[:3]] + [(moved[3], "improvement")])

    # A threshold above the largest slow-down: nothing regressed, so CI passes.
    above = max(x["changePercent"] for x in lines if x["kind"] == "regression") + 0.01
    assert main(["regressions", str(report_ids[-1]), "--threshold", str(above), "--json",
                 *db]) == 0
    left = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all(x["kind"] == "improvement" and -x["changePercent"] > above for x in left)
    assert main(["regressions", str(report_ids[2]), *db]) == 0  # insufficient history
    assert main(["regressions", "999999", *db]) == 2
    assert "report 999999 does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["regressions", "1", "--threshold", "-3", *db])
    assert "--threshold: must be a positive number, got -3" in capsys.readouterr().err


def test_history_reads_need_a_read_token_when_required(
    series: Any, settings_env: Callable[..., None], auth: Callable[[str], dict[str, str]],
    reference: Body,
) -> None:
    _, report_ids, moved = series
    settings_env(require_read_token=1)
    paths = [f"{REPORTS}/{report_ids[-1]}/regressions",
             f"/api/v1/history?caseId={moved[0]}&gpu={reference['meta']['gpu']}"]
    with TestClient(create_app(), follow_redirects=False) as client:
        for path in paths:
            error_detail(client.get(path), 401, "unauthorized")
            assert client.get(path, headers=auth("read")).status_code == 200


def test_cli_url_asks_a_live_server(series: Any, database_url: str, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    _, report_ids, moved = series
    assert main(["regressions", str(report_ids[-1]), "--json",
                 "--database-url", database_url]) == 1
    from_database = capsys.readouterr().out
    with live_server(database_url, tmp_path) as server:
        url = ["--url", server.url]
        assert main(["regressions", str(report_ids[-1]), "--json", *url]) == 1
        assert capsys.readouterr().out == from_database
        assert main(["regressions", str(report_ids[-1]), "--threshold", "40", *url]) == 0
        assert "0 regression(s), 0 improvement(s), 63 unchanged" in capsys.readouterr().err
        assert main(["regressions", "999999", *url]) == 2
        assert "HTTP 404: report 999999 does not exist" in capsys.readouterr().err
