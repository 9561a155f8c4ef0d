"""The HTML export: its content checked against the reference report's own numbers, the
download routes, the CLI (database and --url), and determinism."""

from __future__ import annotations

import base64
import copy
import hashlib
import math
import os
import re
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import fresh_postgres_database, live_server
from export_helpers import chart_specs, masked, parse, table_rows
from fastapi.testclient import TestClient
from live import REPO
from sqlalchemy.orm import Session

from app import figures
from app.case_fields import FILTERABLE, CaseFilter
from app.dashboard import links
from app.export.document import csp_hash, export_spec
from app.export.service import export_report
from app.services import report_view
from app.services import reports as report_service
from app.services.case_table import TABLE_COLUMNS
from cli import export as command
from cli.main import main
from cli.parser import build_parser
from ingest.bounds import BOUND_UTIL_PERCENT
from ingest.validate import validate_report

SCRIPT_NOTE = "<script>alert(1)</script><img src=x onerror=\"alert(2)\"> & done"


def store(session: Session, report: dict[str, Any]) -> int:
    result = report_service.ingest_report(session, report, validate_report(report))
    session.commit()
    return result.id


def exported(session: Session, report_id: int, filters: CaseFilter | None = None) -> str:
    return export_report(session, report_id, filters or CaseFilter()).html


def _spread(case: dict[str, Any]) -> float:
    windows = case["windows"]["combined"]
    return (max(windows) - min(windows)) / statistics.median(windows) * 100


def expected_caveats(cases: list[dict[str, Any]]) -> dict[str, int]:
    """The two caveats the reference carries, from docs/metrics.md's definitions. The other codes
    cannot apply: every case is accepted, measured, not emulated and under its peak."""
    counts: Counter[str] = Counter()
    for case in cases:
        assert case["numericalAccepted"] and case["graphAccepted"] and not case["ooms"]
        if _spread(case) > 5.0:
            counts["noisy_windows"] += 1
        rows = case["receiveRows"]
        if max(rows) >= 2 * (sum(rows) / len(rows)):
            counts["hot_rank"] += 1
    return dict(counts)


def test_export_shows_header_notes_caveats_summary_charts_and_every_case(
    session: Session, reference: dict[str, Any],
) -> None:
    reference["meta"]["surpriseNote"] = SCRIPT_NOTE  # an unknown note, with markup
    report_id = store(session, reference)
    document = exported(session, report_id)
    root = parse(document)
    meta = reference["meta"]

    assert root.by_id("export-gpu").text == meta["gpu"]
    assert root.by_id("export-source").text == meta["source"]
    assert meta["date"] in root.by_id("export-header").text
    shape = table_rows(root.by_id("export-shape"))
    assert dict(zip(shape[0], shape[1], strict=True)) == {
        k: str(v) for k, v in meta["shape"].items()}
    peaks = dict(table_rows(root.by_id("export-peaks"))[1:])
    for precision, tf in meta["theoreticalTFPerGPU"].items():
        assert peaks[f"{precision} dense"] == f"{tf:g} TFLOP/s per GPU"
    assert peaks["HBM"] == f"{meta['theoreticalHBMGBps']:g} GB/s"

    # Every *Note verbatim, the unknown one too, as text: its markup is not markup.
    notes = {e.attrs["data-note"]: e.find_all("p")[0].text for e in root.find_all(
        "div", class_="note")}
    assert notes == {k: v for k, v in meta.items() if k.endswith("Note")}
    assert "<script>alert" not in document and "<img src=x" not in document

    caveats = {row[0]: int(row[1]) for row in table_rows(root.by_id("export-caveats"))[1:]}
    assert caveats == expected_caveats(reference["cases"]) == {
        "hot_rank": 28, "noisy_windows": 16}  # hot: the 28 cases of imbalance 4 and 8

    # Summary: % of peak from the report's own peaks, by hand.
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for case in reference["cases"]:
        groups[(case["mode"], case["precision"], case["pipeline"])].append(case)
    summary = table_rows(root.by_id("export-summary").find_all("table")[0])[1:]
    assert len(summary) == len(groups)
    for mode, precision, pipeline, count, best, median, useful, layer, limiters in summary:
        group = groups[(mode, precision, pipeline)]
        percents = [c["usefulTFPerGPU"] / meta["theoreticalTFPerGPU"][precision] * 100
                    for c in group]
        assert int(count) == len(group)
        # Tied within noise: another case within the larger windows' spread of the best.
        top = max(range(len(group)), key=lambda i: percents[i])
        tied = any(i != top and (percents[top] - percents[i]) / percents[top] * 100
                   <= max(_spread(group[top]), _spread(group[i])) for i in range(len(group)))
        assert best == f"{percents[top]:,.1f}" + (" (tied within noise)" if tied else "")
        assert median == f"{statistics.median(percents):,.1f}"
        assert useful.startswith(f"{max(c['usefulTFPerGPU'] for c in group):,.1f}")
        assert layer == f"{statistics.median(c['layerMS'] for c in group):,.3f}"
        # Each case's limiter counted once: the counts add up to the group.
        assert sum(int(part.split()[1]) for part in limiters.split(", ")) == len(group)

    # Every chart of the report page, from the dashboard's own builders.
    # The reference has no phaseMS: the phase chart is left out, one line says why.
    specs = chart_specs(root)
    assert list(specs) == [f"chart-{c.key}" for c in figures.CHARTS if c.key != "phases"]
    for chart in figures.CHARTS:
        assert bool(root.find_all("div", id=f"chart-{chart.key}")) == (chart.key != "phases")
    assert [p.text for p in root.find_all("p") if "absent-chart" in p.classes()] == [
        "Phases not drawn: no case in view has per-phase times (phaseMS: the runner did not "
        "time phases)."]
    view = report_view.report_view(report_view.ReportCache(), session, report_id, CaseFilter())
    for panel in view.panels:
        if panel.absent:
            continue
        assert specs[f"chart-{panel.key}"] == export_spec(panel.figure)
        figures.to_figure(specs[f"chart-{panel.key}"]).to_dict()  # plotly accepts it
    assert sum(len(t.get("x") or []) for t in specs["chart-throughput"]["data"]) == 63
    # The numbered points' key, once after the charts: number n is the n-th case in view.
    key = root.by_id("export-point-key").find_all("li")
    assert [(li.attrs["value"], li.text) for li in key] == [
        (str(i + 1), c["id"]) for i, c in enumerate(reference["cases"])]
    for chart in ("scaling", "roofline", "intensity"):
        assert "points numbered" in root.by_id(f"section-{chart}").text

    # The case table: every case in report order, with its derived fields and caveats.
    rows = table_rows(root.by_id("export-cases").find_all("table")[0])
    header, body = rows[0], rows[1:]
    assert [r[0] for r in body] == [c["id"] for c in reference["cases"]]
    assert header == [label for _, label in TABLE_COLUMNS]
    percent = header.index("% of peak")
    for row, case in zip(body, reference["cases"], strict=True):
        expected = case["usefulTFPerGPU"] / meta["theoreticalTFPerGPU"][case["precision"]] * 100
        # As the page's grid shows it: 4 significant digits.
        digits = max(0, 3 - math.floor(math.log10(expected)))
        assert row[percent] == f"{round(expected, digits):,.{digits}f}".rstrip("0").rstrip(".")
        noisy = "noisy_windows" in row[-1]
        assert noisy == (_spread(case) > 5.0)


def test_export_is_deterministic_apart_from_the_generation_time(
    session: Session, reference: dict[str, Any],
) -> None:
    report_id = store(session, reference)
    first = export_report(session, report_id, CaseFilter(),
                          now=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)).html
    second = export_report(session, report_id, CaseFilter()).html
    assert "2026-01-02T03:04:05Z" in first and "2026-01-02T03:04:05Z" not in second
    assert first != second
    assert masked(first).encode() == masked(second).encode()


def test_csp_allows_exactly_the_inline_scripts_and_styles_of_the_file(
    session: Session, reference: dict[str, Any],
) -> None:
    reference["cases"] = reference["cases"][:3]
    root = parse(exported(session, store(session, reference)))
    csp = root.find_all("meta", **{"http-equiv": "Content-Security-Policy"})[0].attrs["content"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    code = [s.text for s in root.find_all("script") if "type" not in s.attrs]
    assert len(code) == 2  # plotly.js and draw.js
    assert directives["script-src"].split() == [csp_hash(s) for s in code]
    styles = [s.text for s in root.find_all("style")]
    empty = "'sha256-" + base64.b64encode(hashlib.sha256(b"").digest()).decode() + "'"
    assert directives["style-src"].split() == [csp_hash(s) for s in styles] + [empty]
    assert "unsafe" not in directives["script-src"] + directives["style-src"]
    assert not root.find_all("link") and not root.find_all("img")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", str(code[1]))


def test_route_serves_a_download_with_the_case_filters_and_the_source_hash(
    client: TestClient, reference: dict[str, Any], auth: Any,
) -> None:
    created = client.post("/api/v1/reports", json=reference, headers=auth("ingest"))
    report_id = created.json()["id"]
    response = client.get(f"/api/v1/reports/{report_id}/export.html",
                          params=[("precision", "bf16"), ("ep", "8"), ("ep", "16")])
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["content-disposition"] == (
        f'attachment; filename="moescope-report-{report_id}.html"')
    root = parse(response.text)
    expected = [c["id"] for c in reference["cases"]
                if c["precision"] == "bf16" and c["ep"] in (8, 16)]
    rows = table_rows(root.by_id("export-cases").find_all("table")[0])[1:]
    assert [r[0] for r in rows] == expected and expected
    assert root.by_id("export-view").text.endswith("filters: ep = 8 or 16, precision = bf16")

    source = client.get(f"/api/v1/reports/{report_id}/report.json").content
    footer = root.by_id("export-footer").text
    assert hashlib.sha256(source).hexdigest() in footer
    assert f"#{report_id}" in footer

    # The dashboard's link spells several values of a filter as the API takes them.
    href = links.report_export_href(report_id, CaseFilter(ep=[8, 16], imbalance=[1.0]))
    linked = parse(client.get(href).text)
    rows = table_rows(linked.by_id("export-cases").find_all("table")[0])[1:]
    assert [r[0] for r in rows] == [c["id"] for c in reference["cases"]
                                    if c["ep"] in (8, 16) and c["imbalance"] == 1]
    # ... and the matrix metric the page shows, which the file opens on.
    href = links.report_export_href(report_id, CaseFilter(ep=[8]), "layerMS")
    assert href.endswith("?ep=8&matrixMetric=layerMS")
    assert 'value="layerMS" checked' in client.get(href).text
    assert "matrixMetric" not in links.report_export_href(report_id, CaseFilter(ep=[8]))

    bad = client.get(f"/api/v1/reports/{report_id}/export.html", params={"ep": "eight"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "ep", 0]
    missing = client.get("/api/v1/reports/999999/export.html")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"


def test_route_takes_the_read_scope_like_every_read(
    client: TestClient, reference: dict[str, Any], auth: Any, settings_env: Any,
) -> None:
    report = {"meta": reference["meta"], "cases": reference["cases"][:2]}
    report_id = client.post("/api/v1/reports", json=report, headers=auth("ingest")).json()["id"]
    settings_env(require_read_token=1)
    with TestClient(client.app) as closed:
        path = f"/api/v1/reports/{report_id}/export.html"
        assert closed.get(path).status_code == 401
        assert closed.get(path, headers=auth("read")).status_code == 200


def test_cli_writes_the_export_from_the_database(
    database_url: str, session: Session, reference: dict[str, Any], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    older = copy.deepcopy(reference)
    older["meta"]["runId"] = "older"
    store(session, older)
    report_id = store(session, reference)
    out = tmp_path / "r.html"
    assert main(["export", "latest", "--database-url", database_url, "-o", str(out),
                 "--mode", "training", "--F", "3072"]) == 0
    root = parse(out.read_text("utf-8"))
    assert f"#{report_id}" in root.by_id("export-footer").text
    rows = table_rows(root.by_id("export-cases").find_all("table")[0])[1:]
    assert [r[0] for r in rows] == [c["id"] for c in reference["cases"]
                                    if c["mode"] == "training" and c["F"] == 3072]
    assert "wrote" in capsys.readouterr().err
    assert main(["export", str(report_id), "--database-url", database_url, "-o", str(out),
                 "--matrix-metric", "limiter"]) == 0
    picked = [p.attrs["value"] for p in parse(out.read_text("utf-8")).find_all("input")
              if "checked" in p.attrs]
    assert picked == ["limiter"]
    capsys.readouterr()
    assert main(["export", "--compare", "1", str(report_id), "--matrix-metric", "layerMS",
                 "--database-url", database_url]) == 2
    assert "--matrix-metric apply to one report's export" in capsys.readouterr().err

    assert main(["export", "12345", "--database-url", database_url, "-o", str(out)]) == 1
    assert "report 12345 does not exist" in capsys.readouterr().err
    assert main(["export", "newest", "--database-url", database_url]) == 2
    assert "REPORT: 'newest'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["export", "1", "--ep", "x", "--database-url", database_url])
    assert "argument --ep: invalid int value: 'x'" in capsys.readouterr().err


def test_cli_filters_are_the_filterable_fields() -> None:
    given = {"mode": "training", "ep": "8", "precision": "bf16", "pipeline": "mega",
             "category": "single_layer", "F": "3072", "imbalance": "4", "limiter": "nvlink"}
    assert set(given) == {f.wire for f in FILTERABLE}
    args = build_parser().parse_args(
        ["export", "1", *(f"--{name}={value}" for name, value in given.items())])
    assert command.target(args).filters == CaseFilter(
        mode=["training"], ep=[8], precision=["bf16"], pipeline=["mega"],
        category=["single_layer"], F=[3072], imbalance=[4.0], limiter=["nvlink"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["export", "1", "--mode", "serving"])


def test_cli_url_needs_none_of_the_servers_packages() -> None:
    """A GPU node's base install has no SQLAlchemy, Dash, plotly or Jinja2."""
    blocked = ("sqlalchemy", "dash", "plotly", "fastapi", "jinja2", "psycopg")
    code = ("import sys\n"
            f"for name in {blocked!r}: sys.modules[name] = None\n"
            "from cli.main import main\n"
            "sys.exit(main(['export', 'latest', '--url', 'http://127.0.0.1:9']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("error: cannot reach http://127.0.0.1:9"), done.stderr


def test_two_processes_write_the_same_file(
    database_url: str, session: Session, reference: dict[str, Any], tmp_path: Path,
) -> None:
    """Across interpreters too (string hashing differs between them): nothing in the file
    depends on a set's or a dict's order."""
    report_id = store(session, reference)
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"{seed}.html"
        subprocess.run([sys.executable, "-m", "cli", "export", str(report_id),
                        "--database-url", database_url, "-o", str(out)],
                       check=True, capture_output=True, cwd=REPO,
                       env={**os.environ, "PYTHONHASHSEED": seed})
        outputs.append(masked(out.read_text("utf-8")).encode())
    assert outputs[0] == outputs[1]


@pytest.mark.live
def test_cli_url_fetches_the_servers_export(
    tmp_path: Path, reference: dict[str, Any], capsys: pytest.CaptureFixture[str],
) -> None:
    with fresh_postgres_database() as url, live_server(url, tmp_path) as server:
        token = server.token("ingest")
        headers = {"Authorization": f"Bearer {token}"}
        report_id = httpx.post(server.url + "/api/v1/reports", json=reference,
                               headers=headers, timeout=60).json()["id"]
        out = tmp_path / "via-url.html"
        assert main(["export", "latest", "--url", server.url, "--token", token, "-o", str(out),
                     "--precision", "nvfp4", "--matrix-metric", "percentOfPeak"]) == 0
        served = httpx.get(f"{server.url}/api/v1/reports/{report_id}/export.html",
                           params={"precision": "nvfp4", "matrixMetric": "percentOfPeak"},
                           timeout=60).text
        assert masked(out.read_text("utf-8")) == masked(served)
        assert 'value="percentOfPeak" checked' in served
        rows = table_rows(parse(served).by_id("export-cases").find_all("table")[0])[1:]
        assert len(rows) == sum(1 for c in reference["cases"] if c["precision"] == "nvfp4")

        named = tmp_path / "named"
        named.mkdir()
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(named)
            assert main(["export", str(report_id), "--url", server.url]) == 0
        assert (named / f"moescope-report-{report_id}.html").is_file()
        assert main(["export", "999", "--url", server.url]) == 1
        assert "HTTP 404: report 999 does not exist" in capsys.readouterr().err

        compared = tmp_path / "compared.html"
        assert main(["export", "--compare", str(report_id), str(report_id), "--url",
                     server.url, "-o", str(compared)]) == 0
        served = httpx.get(f"{server.url}/api/v1/compare/export.html",
                           params={"base": report_id, "head": report_id}, timeout=60).text
        assert masked(compared.read_text("utf-8")) == masked(served)


def test_compare_export_route_and_cli(
    client: TestClient, reference: dict[str, Any], auth: Any, database_url: str,
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    head = copy.deepcopy(reference)
    head["meta"]["runId"] = "head <b>run</b>"
    slower = head["cases"][5]
    slower["layerMS"] *= 1.25
    slower["usefulTFPerGPU"] /= 1.25
    dropped = head["cases"].pop(9)
    head["cases"].append({**copy.deepcopy(head["cases"][0]), "id": "new <i>case</i>"})
    ids = [client.post("/api/v1/reports", json=r, headers=auth("ingest")).json()["id"]
           for r in (reference, head)]
    response = client.get("/api/v1/compare/export.html",
                          params={"base": ids[0], "head": ids[1]})
    assert response.status_code == 200
    assert response.headers["content-disposition"] == (
        f'attachment; filename="moescope-compare-{ids[0]}-{ids[1]}.html"')
    root = parse(response.text)
    matched = len(reference["cases"]) - 1
    assert root.by_id("export-compare-summary").text.startswith(
        f"{matched} matched cases: 1 regression, 0 improvements, {matched - 1} "
        "unchanged, 0 with too little history; judged each case against the base alone")
    rows = table_rows(root.by_id("export-compare-table"))
    assert rows[0] == ["case", "verdict (layer time)", "why: phases, GPU state", "time",
                       "throughput", "bandwidth", "memory", "phases", "GPU state"]
    first = rows[1]  # regressions first
    assert first[0] == slower["id"]
    assert first[1].startswith("regression +25.0 % (noise ") and first[1].endswith("vs base)")
    base_ms = reference["cases"][5]["layerMS"]
    assert first[3].startswith(f"layer {base_ms:.3g} → {base_ms * 1.25:.3g} ms (+25.0 %)")
    assert " TFLOP/s (-20.0 %)" in first[4]
    assert [li.text for li in root.by_id("export-compare-groups").find_all("li")] == [
        f"1 {slower['mode']} {slower['precision']} {slower['pipeline']} {slower['category']} "
        f"EP{slower['ep']} F{slower['F']} i{slower['imbalance']:g} case: +25.0 % (regression)"]
    assert [li.text for li in root.by_id("export-only-base").find_all("li")] == [dropped["id"]]
    assert [li.text for li in root.by_id("export-only-head").find_all("li")] == [
        "new <i>case</i>"]
    assert "head <b>run</b>" in root.by_id("export-reports").text
    provenance = table_rows(root.by_id("export-provenance-table"))
    assert ["runId", "(absent)", "head <b>run</b>"] in provenance
    # The ratio chart is drawn by the inline scripts the policy names by hash.
    assert root.by_id("chart-ratio") is not None
    csp = root.find_all("meta", **{"http-equiv": "Content-Security-Policy"})[0].attrs["content"]
    assert "default-src 'none';" in csp and "'sha256-" in csp.split("script-src")[1]
    footer = root.by_id("export-footer").text
    for report_id in ids:
        source = client.get(f"/api/v1/reports/{report_id}/report.json").content
        assert hashlib.sha256(source).hexdigest() in footer

    assert client.get("/api/v1/compare/export.html", params={"base": ids[0]}).status_code == 422
    assert client.get("/api/v1/compare/export.html",
                      params={"base": ids[0], "head": 99999}).status_code == 404

    out = tmp_path / "compare.html"
    assert main(["export", "--compare", str(ids[0]), str(ids[1]), "-o", str(out),
                 "--database-url", database_url]) == 0
    assert masked(out.read_text("utf-8")) == masked(response.text)
    assert main(["export", "1", "--compare", "1", "2", "--database-url", database_url]) == 2
    assert main(["export", "--compare", "1", "2", "--ep", "8",
                 "--database-url", database_url]) == 2
    assert "not to --compare" in capsys.readouterr().err


def _spread(case: dict[str, Any]) -> float:
    """DESIGN.md's windowSpreadPercent, by hand: (max - min) / median of the windows."""
    windows = case["windows"]["combined"]
    return (max(windows) - min(windows)) / statistics.median(windows) * 100


def test_export_shows_the_pages_host_line_and_limiter_words(
    session: Session, reference: dict[str, Any]
) -> None:
    """What the report page shows besides the tables: meta.host's facts (or that there are
    none), and what bounds each case in words on its limiter cell, with the busiest rank's
    compute share worked out here: % of peak x max/mean received rows."""
    bare = parse(exported(session, store(session, copy.deepcopy(reference))))
    assert "host and software not reported" in bare.by_id("export-host").text
    assert "first report of its series" in bare.by_id("export-host").text
    reference["meta"]["host"] = {"hostname": "gb300-a", "driver": None, "cuda": "13.0"}
    reference["meta"]["runId"] = "with-host"
    root = parse(exported(session, store(session, reference)))
    host = " ".join(root.by_id("export-host").text.split())
    assert "host gb300-a" in host and "driver unknown" in host and "CUDA 13.0" in host
    column = [name for name, _ in TABLE_COLUMNS].index("limiter")
    peaks = reference["meta"]["theoreticalTFPerGPU"]
    compute_bound = 0
    for case in reference["cases"]:
        cell = root.by_id(f"case-{case['id']}").find_all("td")[column]
        rows = case["receiveRows"]
        compute = case["usefulTFPerGPU"] / peaks[case["precision"]] * 100 * max(rows) / (
            sum(rows) / len(rows))
        title = cell.attrs["title"]
        hot = max(rows) / (sum(rows) / len(rows))
        if "compute" in cell.text:  # the nearest roof is compute
            words = "compute-bound" if compute >= BOUND_UTIL_PERCENT else "nearest roof compute"
            assert title.startswith(words) and f"({compute:.0f} %" in title, case["id"]
            # Printed, the cell itself says it in a few words: paper shows no title.
            near = "" if compute >= BOUND_UTIL_PERCENT else "near "
            assert cell.text == f"{near}compute {compute:.0f} %" + (
                f", {hot:.1f}× rows" if hot >= 1.05 else ""), case["id"]
            compute_bound += 1
        assert title, case["id"]
    assert compute_bound == 46  # the reference's compute limiters (test_limiter: by hand)
