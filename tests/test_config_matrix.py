"""The configuration matrix from the API (JSON and CSV) and its pure builder, against the
reference's cases counted here by hand."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

import pytest
from api_helpers import REPORTS
from export_helpers import parse, table_rows
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session
from views import views

from app.case_fields import CaseFilter
from app.export.service import export_report
from app.matrix_metrics import METRICS
from app.services import reports as report_service
from app.services.matrix import build_matrix
from ingest.validate import validate_report

Auth = Callable[[str], dict[str, str]]
Body = dict[str, Any]
# The reference ran inference in bf16 standard, mxfp8 mega and staged, nvfp4 mega, and
# training in the same but nvfp4: 18 configurations of (mode, EP, category, F, imbalance).
COLUMNS = [{"precision": "bf16", "pipeline": "standard"},
           {"precision": "mxfp8", "pipeline": "staged"},
           {"precision": "mxfp8", "pipeline": "mega"},
           {"precision": "nvfp4", "pipeline": "mega"}]


@pytest.fixture
def report_id(client: TestClient, auth: Auth, reference: Body) -> int:
    posted = client.post(REPORTS, json=reference, headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    return int(posted.json()["id"])


def _config(case: Body) -> tuple[Any, ...]:
    return (case["mode"], case["ep"], case["category"], case["F"], float(case["imbalance"]))


def test_matrix_json_has_a_row_per_configuration_and_blanks_where_not_run(
    client: TestClient, report_id: int, reference: Body,
) -> None:
    got = client.get(f"{REPORTS}/{report_id}/matrix")
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["metric"] == "usefulTFPerGPU" and body["columns"] == COLUMNS
    by_cell = {(*_config(c), c["precision"], c["pipeline"]): c for c in reference["cases"]}
    configs = {_config(c) for c in reference["cases"]}
    assert len(body["rows"]) == len(configs) == 18
    # Grouped by mode, then EP, F, imbalance.
    keys = [(r["mode"], r["ep"], r["F"], r["imbalance"]) for r in body["rows"]]
    assert keys == sorted(keys)
    assert body["rows"][0]["label"] == "EP8 F3072 i1 single_layer"
    blanks = 0
    for row in body["rows"]:
        values = []
        for column, cell in zip(COLUMNS, row["cells"], strict=True):
            case = by_cell.get((row["mode"], row["ep"], row["category"], row["F"],
                                row["imbalance"], column["precision"], column["pipeline"]))
            if case is None:
                assert cell is None
                blanks += 1
                continue
            assert cell == {"caseId": case["id"], "value": case["usefulTFPerGPU"],
                            "caseIds": [case["id"]], "count": 1}
            values.append((case["usefulTFPerGPU"], COLUMNS.index(column)))
        assert row["best"] == max(values)[1]
    # Training ran no nvfp4: one blank in each of its 9 rows.
    assert blanks == 9
    assert all(r["cells"][3] is None for r in body["rows"] if r["mode"] == "training")


def test_matrix_filters_metrics_and_csv(client: TestClient, report_id: int,
                                        reference: Body) -> None:
    url = f"{REPORTS}/{report_id}/matrix"
    got = client.get(url, params={"mode": "training", "ep": 64, "metric": "layerMS"}).json()
    assert got["columns"] == COLUMNS[:3] and got["better"] == "lower"
    training = [c for c in reference["cases"] if c["mode"] == "training" and c["ep"] == 64]
    assert len(got["rows"]) == len({_config(c) for c in training}) == 6
    for row in got["rows"]:
        times = [cell["value"] for cell in row["cells"]]
        assert row["best"] == times.index(min(times))  # the fastest layer is the best

    limiter = client.get(url, params={"metric": "limiter"}).json()
    assert all(r["best"] is None for r in limiter["rows"])
    # On the busiest rank every reference case reaches 25 % of a roof (test_limiter counts
    # 46 compute, 12 NVLink, 5 HBM by hand): no latency cell.
    assert {cell["value"] for r in limiter["rows"] for cell in r["cells"] if cell} == {
        "compute", "hbm", "nvlink"}

    bad = client.get(url, params={"metric": "speed"})
    assert bad.status_code == 422 and "metric" in bad.text and "percentOfPeak" in bad.text

    for response in (client.get(url, params={"format": "csv"}),
                     client.get(url, headers={"Accept": "text/csv"})):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/csv")
        lines = list(csv.reader(io.StringIO(response.text)))
        assert lines[0] == ["mode", "ep", "category", "F", "imbalance", "bf16 standard",
                            "mxfp8 staged", "mxfp8 mega", "nvfp4 mega"]
        assert len(lines) == 1 + 18
        training_lines = [line for line in lines[1:] if line[0] == "training"]
        assert len(training_lines) == 9 and all(line[8] == "" for line in training_lines)
        first = next(c for c in reference["cases"]
                     if c["id"] == "inference-ep8-bf16-standard-single_layer-F3072-i1")
        assert float(lines[1][5]) == first["usefulTFPerGPU"]
    assert client.get(f"{REPORTS}/999999/matrix").status_code == 404


def test_one_category_needs_no_category_in_the_label(reference: Body) -> None:
    cases = [dict(c, caveats=[]) for c in reference["cases"] if c["category"] == "width"]
    matrix = build_matrix(views(cases), "percentOfPeak")
    assert [r.label for r in matrix.rows][:3] == ["EP16 F1536 i1", "EP16 F3072 i1",
                                                  "EP16 F6144 i1"]
    # percentOfPeak is not on the wire: a case without it is a cell without a value.
    assert all(cell is None or cell.value is None for r in matrix.rows for cell in r.cells)
    assert all(r.best is None for r in matrix.rows)


def test_the_export_draws_the_same_matrix(session: Session, reference: Body) -> None:
    result = report_service.ingest_report(session, reference, validate_report(reference))
    session.commit()
    document = export_report(session, result.id, CaseFilter(mode=["training"])).html
    section = parse(document).by_id("export-matrix")
    lines = table_rows(section.find_all("table")[0])
    assert lines[0] == ["configuration", "bf16", "mxfp8"]
    assert lines[1] == ["standard", "staged", "mega"]
    assert lines[2] == ["training"]
    body = lines[3:]
    training = [c for c in reference["cases"] if c["mode"] == "training"]
    assert len(body) == len({_config(c) for c in training}) == 9
    # EP32 F3072 i1: bf16 1366.6, mxfp8 staged 1921.8 (the best), mega 1875.6 TFLOP/s.
    assert body[0] == ["EP32 F3072 i1 single_layer", "1,367", "\u2605 1,922", "1,876"]
    links = [a.attrs["href"] for a in section.find_all("a")]
    assert "#case-training-ep32-mxfp8-staged-single_layer-F3072-i1" in links
    assert parse(document).by_id("case-training-ep32-mxfp8-staged-single_layer-F3072-i1")


def _matrix_texts(section: Any, metric: str) -> list[list[str]]:
    return table_rows(section.by_id(f"matrix-{metric}").find_all("table")[0])


def test_the_export_holds_every_metrics_matrix_and_opens_on_the_chosen_one(
    session: Session, reference: Body,
) -> None:
    result = report_service.ingest_report(session, reference, validate_report(reference))
    session.commit()
    document = parse(export_report(session, result.id, CaseFilter(mode=["training"]),
                                   matrix_metric="layerMS").html)
    section = document.by_id("export-matrix")
    picks = section.find_all("input", type="radio")
    assert [p.attrs["value"] for p in picks] == list(METRICS)
    assert [p.attrs["value"] for p in picks if "checked" in p.attrs] == ["layerMS"]
    by_cell = {(*_config(c), c["precision"], c["pipeline"]): c for c in reference["cases"]}
    # EP32 F3072 i1 in training: bf16 standard, mxfp8 staged, mxfp8 mega, as the page shows
    # them (3 decimals), the fastest starred.
    first = _matrix_texts(section, "layerMS")[3]
    times = [by_cell[("training", 32, "single_layer", 3072, 1.0, p, q)]["layerMS"]
             for p, q in (("bf16", "standard"), ("mxfp8", "staged"), ("mxfp8", "mega"))]
    fastest = times.index(min(times))
    assert first == ["EP32 F3072 i1 single_layer",
                     *[("\u2605 " if i == fastest else "") + f"{t:,.3f}"
                       for i, t in enumerate(times)]]
    # The limiter's matrix names a roof per cell and stars none.
    limiters = _matrix_texts(section, "limiter")[3:]
    assert {cell for row in limiters for cell in row[1:]} <= {"compute", "hbm", "nvlink",
                                                              "latency"}
    assert not section.by_id("matrix-limiter").find_all(class_="num matrix-best")


def test_export_route_and_cli_take_the_matrix_metric(
    client: TestClient, report_id: int, tmp_path: Any,
) -> None:
    url = f"{REPORTS}/{report_id}/export.html"
    got = client.get(url, params={"matrixMetric": "percentOfPeak", "mode": "inference"})
    assert got.status_code == 200, got.text
    picked = [p.attrs["value"] for p in parse(got.text).find_all("input", type="radio")
              if "checked" in p.attrs]
    assert picked == ["percentOfPeak"]
    bad = client.get(url, params={"matrixMetric": "speed"})
    assert bad.status_code == 422
    assert "matrixMetric" in bad.text and "layerMS" in bad.text
