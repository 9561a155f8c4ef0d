"""The platforms read model: a second report built here from the reference (another GPU,
other peaks, another shape, throughput scaled per configuration by known factors, one
configuration dropped) matched against the reference by configuration."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from typing import Any

from views import views

from app.services.platforms import PlatformInput, build_platforms, platform_of
from ingest.reference import reference_report_text


def _factor(case: dict[str, Any]) -> float:
    # Known, varied per configuration: depends on EP, F and precision.
    return float(0.5 + 0.01 * case["ep"]) + (0.1 if case["precision"] == "bf16" else 0.0) \
        + float(case["F"]) / 100_000


@dataclass(frozen=True)
class Raw:
    """A platform's report as these tests build it: its cases as the API serves them."""

    platform: Any
    cases: list[dict[str, Any]]


def _build(raws: list[Raw], **options: Any) -> Any:
    return build_platforms([PlatformInput(r.platform, views(r.cases)) for r in raws],
                           **options)


def _inputs() -> tuple[Raw, Raw, dict[str, Any], str]:
    ref = json.loads(reference_report_text())
    other = copy.deepcopy(ref)
    other["meta"]["gpu"] = "NVIDIA H200"
    other["meta"]["theoreticalTFPerGPU"] = {"bf16": 989, "mxfp8": 1979}
    other["meta"]["shape"]["T"] = 4096
    dropped = other["cases"].pop(0)
    for case in other["cases"]:
        if case.get("usefulTFPerGPU") is not None:
            case["usefulTFPerGPU"] *= _factor(case)
    a = Raw(platform_of(1, ref["meta"]["gpu"], ref["meta"]["date"], ref["meta"]),
            ref["cases"])
    b = Raw(platform_of(9, "NVIDIA H200", "2026-11-01", other["meta"]), other["cases"])
    return a, b, ref, dropped["id"]


def _key(case: dict[str, Any]) -> tuple[Any, ...]:
    return (case["mode"], case["ep"], case["category"], case["F"], float(case["imbalance"]),
            case["precision"], case["pipeline"])


def _row_key(row: Any) -> tuple[Any, ...]:
    c = row.configuration
    return (c.mode, c.ep, c.category, c.F, c.imbalance, row.precision, row.pipeline)


def test_ratios_match_known_factors_and_missing_is_not_run() -> None:
    a, b, ref, dropped_id = _inputs()
    page = _build([a, b], baseline=0)
    assert page.total == len(ref["cases"])
    assert page.matched == len(ref["cases"]) - 1
    assert [p.gpu for p in page.platforms] == [ref["meta"]["gpu"], "NVIDIA H200"]
    assert dict(page.platforms[1].peaks) == {"bf16": 989.0, "mxfp8": 1979.0}
    by_key = {_row_key(r): r for r in page.rows}
    checked = 0
    for case in ref["cases"]:
        row = by_key[_key(case)]
        if case["id"] == dropped_id:
            assert row.cells[1].useful_tf is None and row.cells[1].reason == "not run"
            continue
        assert row.shape_differs  # T 2048 vs 4096
        if case.get("usefulTFPerGPU"):
            assert math.isclose(row.cells[1].ratio or 0, _factor(case), rel_tol=1e-9)
            assert row.cells[0].ratio == 1.0
            checked += 1
    assert checked > 10


def test_geometric_means_per_mode_and_precision() -> None:
    a, b, ref, dropped_id = _inputs()
    page = _build([a, b])
    expected: dict[tuple[str, str], list[float]] = {}
    for case in ref["cases"]:
        if case["id"] != dropped_id and case.get("usefulTFPerGPU"):
            expected.setdefault((case["mode"], case["precision"]), []).append(
                math.log(_factor(case)))
    got = {(g.mode, g.precision): g for g in page.geomeans}
    assert set(got) == set(expected)
    for key, logs in expected.items():
        assert got[key].count[1] == len(logs)
        assert math.isclose(got[key].ratios[1] or 0, math.exp(sum(logs) / len(logs)),
                            rel_tol=1e-9)


def test_winner_is_the_faster_platform_and_baseline_can_change() -> None:
    a, b, ref, _ = _inputs()
    page = _build([a, b], baseline=1)
    assert page.baseline == 1
    for row in page.rows:
        tfs = [c.useful_tf for c in row.cells]
        if None in tfs or row.cells[0].tied:
            continue
        faster = 0 if (tfs[0] or 0) > (tfs[1] or 0) else 1
        assert row.cells[faster].best and not row.cells[1 - faster].best
        assert row.cells[1].ratio == 1.0


def test_same_shape_is_not_marked() -> None:
    a, _, _, _ = _inputs()
    page = _build([a, a])
    assert not any(r.shape_differs for r in page.rows)
    assert page.matched == page.total


def test_csv_and_markdown_carry_the_ratios_and_not_run() -> None:
    import csv
    import io

    from app.services.platforms_text import platforms_csv, platforms_markdown

    a, b, ref, dropped_id = _inputs()
    page = _build([a, b])
    rows = list(csv.DictReader(io.StringIO(platforms_csv(page))))
    assert len(rows) == 2 * len(ref["cases"])
    dropped = next(c for c in ref["cases"] if c["id"] == dropped_id)
    line = next(r for r in rows if r["report_id"] == "9" and r["mode"] == dropped["mode"]
                and int(r["ep"]) == dropped["ep"] and int(r["F"]) == dropped["F"]
                and r["precision"] == dropped["precision"]
                and r["pipeline"] == dropped["pipeline"]
                and r["category"] == dropped["category"]
                and float(r["imbalance"]) == float(dropped["imbalance"]))
    assert line["not_run_reason"] == "not run" and line["useful_tf_per_gpu"] == ""
    for r in rows:
        if r["report_id"] == "9" and r["ratio_to_baseline"]:
            case = next(c for c in ref["cases"] if _key(c) == (
                r["mode"], int(r["ep"]), r["category"], int(r["F"]), float(r["imbalance"]),
                r["precision"], r["pipeline"]))
            assert math.isclose(float(r["ratio_to_baseline"]), _factor(case), abs_tol=5e-5)
    text = platforms_markdown(page)
    # Short names in the headline; each report's full GPU name and peaks listed under it.
    assert text.startswith("# GB300 NVL72 vs H200: peaks and shapes differ, matched by "
                           f"configuration: {len(ref['cases']) - 1} of {len(ref['cases'])}")
    assert f"{ref['meta']['gpu']}, {ref['meta']['date']}; peaks bf16 2,500, mxfp8 5,000" in text
    assert f"{page.matched} of {page.total}" in text and "not run" in text


def test_the_service_reads_stored_reports_and_matches_them(
        session: Any, reference: dict[str, Any]) -> None:
    from app.services import reports as report_service
    from app.services.platforms import platforms_page
    from ingest.validate import validate_report

    other = copy.deepcopy(reference)
    other["meta"]["gpu"] = "NVIDIA H200"
    other["meta"]["date"] = "2026-11-02"
    other["meta"]["theoreticalTFPerGPU"] = {"bf16": 989, "mxfp8": 1979}
    gone = other["cases"].pop()
    for case in other["cases"]:
        if case.get("usefulTFPerGPU") is not None:
            case["usefulTFPerGPU"] *= _factor(case)
    first = report_service.ingest_report(session, reference, validate_report(reference)).id
    second = report_service.ingest_report(session, other, validate_report(other)).id
    session.commit()
    page = platforms_page(session, [first, second], baseline_id=second)
    assert page.baseline == 1 and page.total == len(reference["cases"])
    assert page.matched == page.total - 1
    assert not any(r.shape_differs for r in page.rows)
    by_key = {_row_key(r): r for r in page.rows}
    assert by_key[_key(gone)].cells[1].reason == "not run"
    for case in other["cases"]:
        ratio = by_key[_key(case)].cells[0].ratio
        if case.get("usefulTFPerGPU"):
            assert math.isclose(ratio or 0, 1 / _factor(case), rel_tol=1e-6)


def test_the_api_serves_json_and_csv_and_rejects_bad_picks(
        client: Any, auth: Any, reference: dict[str, Any]) -> None:
    import csv
    import io

    other = copy.deepcopy(reference)
    other["meta"]["gpu"] = "NVIDIA H200"
    other["meta"]["date"] = "2026-11-03"
    for case in other["cases"]:
        if case.get("usefulTFPerGPU") is not None:
            case["usefulTFPerGPU"] *= _factor(case)
    ids = [client.post("/api/v1/reports", json=body, headers=auth("ingest")).json()["id"]
           for body in (reference, other)]
    got = client.get(f"/api/v1/platforms?reports={ids[0]},{ids[1]}&baseline={ids[0]}")
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["matched"] == body["total"] == len(reference["cases"])
    assert [p["gpu"] for p in body["platforms"]] == [reference["meta"]["gpu"], "NVIDIA H200"]
    for row in body["rows"]:
        ratio = row["cells"][1]["ratio"]
        if ratio is not None:
            case = next(c for c in reference["cases"] if _key(c) == (
                row["configuration"]["mode"], row["configuration"]["ep"],
                row["configuration"]["category"], row["configuration"]["F"],
                row["configuration"]["imbalance"], row["precision"], row["pipeline"]))
            assert math.isclose(ratio, _factor(case), rel_tol=1e-6)
    # The winner matrix: a row per configuration, a cell per (platform, variant).
    winners = body["winners"]
    variants = {(c["precision"], c["pipeline"]) for c in reference["cases"]}
    assert len(winners["rows"]) == len({_config(c) for c in reference["cases"]})
    assert len(winners["columns"]) == 2 * len(variants) == 2 * len(winners["variants"])
    assert {(c["precision"], c["pipeline"]) for c in winners["columns"]} == variants
    assert all(len(r["cells"]) == len(winners["columns"]) and sum(
        c["best"] for c in r["cells"]) == 1 for r in winners["rows"])
    text = client.get(f"/api/v1/platforms?reports={ids[0]},{ids[1]}&format=csv").text
    assert len(list(csv.DictReader(io.StringIO(text)))) == 2 * len(reference["cases"])
    assert client.get("/api/v1/platforms?reports=1,x").status_code == 422
    assert client.get(f"/api/v1/platforms?reports={ids[0]}&baseline={ids[1]}"
                      ).status_code == 422
    assert client.get("/api/v1/platforms?reports=999999").status_code == 404


def test_the_cli_prints_markdown_and_csv(
        engine: Any, database_url: str, tmp_path: Any, reference: dict[str, Any],
        capsys: Any) -> None:
    import csv
    import io

    from cli.main import main

    db = ["--database-url", database_url]
    other = copy.deepcopy(reference)
    other["meta"]["gpu"] = "NVIDIA H200"
    other["meta"]["date"] = "2026-11-04"
    gone = other["cases"].pop(0)
    for i, body in enumerate((reference, other)):
        (tmp_path / f"{i}.json").write_text(json.dumps(body))
        assert main(["ingest", str(tmp_path / f"{i}.json"), *db]) == 0
    capsys.readouterr()
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from app.models import ReportRow
    with Session(engine) as session:
        ids = [str(i) for i in session.scalars(select(ReportRow.id).order_by(ReportRow.id))]
    first, second = ids[-2:]
    assert main(["platforms", first, second, *db]) == 0
    text = capsys.readouterr().out
    n = len(reference["cases"])
    assert f"GB300 NVL72 vs H200: matched by configuration: {n - 1} of {n}" in text
    assert main(["platforms", first, second, "--baseline", second, "--format", "csv",
                 *db]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 2 * n
    missing = [r for r in rows if r["not_run_reason"] == "not run"]
    assert [(r["report_id"], r["precision"], r["pipeline"]) for r in missing] == [
        (second, gone["precision"], gone["pipeline"])]
    assert main(["platforms", first, second, "--baseline", "999999", *db]) == 2
    # No ids: the newest report of each GPU, newest first (the H200 was ingested last).
    assert main(["platforms", *db]) == 0
    assert capsys.readouterr().out.startswith(
        f"# H200 vs GB300 NVL72: matched by configuration: {n - 1} of {n}")


def test_tf_per_watt_where_gpu_state_has_power() -> None:
    a, b, _, _ = _inputs()
    case = dict(b.cases[0])
    case["gpuState"] = {"powerMaxW": 1000.0}
    page = _build([a, Raw(b.platform, [case, *b.cases[1:]])])
    row = next(r for r in page.rows if _row_key(r) == _key(case))
    assert math.isclose(row.cells[1].tf_per_watt or 0, case["usefulTFPerGPU"] / 1000.0)
    assert row.cells[0].tf_per_watt is None


def _other_gpu(reference: dict[str, Any], *, date: str = "2026-11-05",
               drop: int | None = 0) -> dict[str, Any]:
    """The reference as another GPU would report it: other peaks, another T, case ids of
    its own (so only a configuration match can pair them), throughput scaled by _factor
    and layer time divided by it, one case dropped."""
    other = copy.deepcopy(reference)
    other["meta"].update(gpu="NVIDIA H200", date=date,
                         theoreticalTFPerGPU={"bf16": 989, "mxfp8": 1979, "nvfp4": 1979})
    other["meta"]["shape"]["T"] = 4096
    if drop is not None:
        other["cases"].pop(drop)
    for case in other["cases"]:
        case["id"] = "h200-" + case["id"]
        if case.get("usefulTFPerGPU") is not None:
            case["usefulTFPerGPU"] *= _factor(case)
    return other


def _ingest(session: Any, *bodies: dict[str, Any]) -> list[int]:
    from app.services import reports as report_service
    from ingest.validate import validate_report

    ids = [report_service.ingest_report(session, b, validate_report(b)).id for b in bodies]
    session.commit()
    return ids


def test_bars_hold_each_platforms_best_variant_per_configuration() -> None:
    a, b, ref, dropped_id = _inputs()
    page = _build([a, b])
    best: dict[tuple[str, str, str], list[float | None]] = {}
    for case in ref["cases"]:
        label = f"EP{case['ep']} F{case['F']} i{float(case['imbalance']):g}"
        slot = best.setdefault((case["mode"], case["category"], label), [None, None])
        tf = case.get("usefulTFPerGPU")
        if tf is None:
            continue
        slot[0] = max(slot[0] or 0.0, tf)
        if case["id"] != dropped_id:
            slot[1] = max(slot[1] or 0.0, tf * _factor(case))
    seen = 0
    for bars in page.bars:
        for j, label in enumerate(bars.labels):
            want = best[(bars.mode, bars.category, label)]
            for i in (0, 1):
                got = bars.values[i][j]
                assert (got is None) == (want[i] is None)
                assert got is None or math.isclose(got, want[i] or 0, rel_tol=1e-12)
            seen += 1
    assert seen == len(best)
    assert [len(p.useful_tf) for p in page.scatter] == [0, 0]  # no % of peak before ingest


def test_stored_cells_carry_utilisations_limiter_and_peaks(
        session: Any, reference: dict[str, Any]) -> None:
    from app.services.platforms import platforms_page
    from ingest.derived import LATENCY_UTIL_PERCENT

    other = _other_gpu(reference)
    first, second = _ingest(session, reference, other)
    page = platforms_page(session, [first, second])
    assert page.headline == (f"GB300 NVL72 vs H200: peaks and shapes differ, matched by "
                             f"configuration: {len(reference['cases']) - 1} "
                             f"of {len(reference['cases'])}")
    assert all(r.shape_differs for r in page.rows if r.cells[1].useful_tf is not None)
    limited = 0
    for row in page.rows:
        for cell, body in zip(row.cells, (reference, other), strict=True):
            if cell.useful_tf is None:
                continue
            peak = body["meta"]["theoreticalTFPerGPU"][row.precision]
            # % of peak against each report's own peak for the precision.
            assert math.isclose(cell.percent_of_peak or 0, cell.useful_tf / peak * 100,
                                rel_tol=1e-6)
            utils = {"compute": cell.compute_util, "hbm": cell.hbm_util,
                     "nvlink": cell.nvlink_util}
            known = {k: v for k, v in utils.items() if v is not None}
            if known:
                roof = max(known, key=lambda k: known[k])
                want = roof if known[roof] >= LATENCY_UTIL_PERCENT else "latency"
                assert cell.limiter == want
                limited += 1
    assert limited > 60
    # Each platform's scatter: its cases' % of peak against useful TF/GPU.
    assert len(page.scatter[0].useful_tf) == sum(
        1 for c in reference["cases"] if c.get("usefulTFPerGPU"))


def test_default_pick_is_the_newest_report_of_each_gpu(
        session: Any, reference: dict[str, Any]) -> None:
    from app.services.platforms import default_pick, platforms_page

    older = copy.deepcopy(reference)
    older["meta"]["date"] = "2026-09-01"
    gb_old, h200, gb_new = _ingest(session, older, _other_gpu(reference), reference)
    assert default_pick(session) == [gb_new, h200]
    page = platforms_page(session, None)
    assert [p.report_id for p in page.platforms] == [gb_new, h200] and page.baseline == 0
    assert gb_old not in [p.report_id for p in page.platforms]
    modes = platforms_page(session, None, h200, modes=["training"], precisions=["bf16"])
    assert modes.baseline == 1
    assert {(r.configuration.mode, r.precision) for r in modes.rows} == {("training", "bf16")}
    assert modes.modes == ("inference", "training")  # what the filter offers stays whole


def test_compare_across_gpus_matches_by_configuration_and_says_so(
        session: Any, reference: dict[str, Any]) -> None:
    from app.services.comparison import compare_reports

    base, head = _ingest(session, reference, _other_gpu(reference, drop=5))
    result = compare_reports(session, base, head)
    n = len(reference["cases"])
    assert result.headline == (f"GB300 NVL72 vs H200: peaks and shapes differ, matched by "
                               f"configuration: {n - 1} of {n}")
    assert len(result.rows) == n - 1 and result.only_base == [reference["cases"][5]["id"]]
    for row in result.rows:
        # Paired with the reference case of its configuration (its id, less our prefix);
        # the layer time was left as posted (only throughput scaled): the ratio is 1.
        assert row.base.id == row.case_id.removeprefix("h200-")
        assert math.isclose(row.ratio, 1.0)
    same = compare_reports(session, base, base)
    assert same.headline is None and len(same.rows) == n
    from app.export.service import export_compare

    exported = export_compare(session, base, head).html
    assert f'id="export-compare-headline">{result.headline}</p>' in exported


def test_compare_without_a_pair_says_why(
        session: Any, reference: dict[str, Any], settings_env: Any) -> None:
    from app.main import create_app
    from app.services.comparison import no_pair_text

    (only,) = _ingest(session, reference)
    create_app()
    from page_helpers import find, texts

    from app.dashboard.pages import compare

    said = " ".join(texts(find(compare.layout(), "compare-no-pair")))
    assert said.startswith(f"The newest report, #{only} ({reference['meta']['gpu']}, "
                           f"{reference['meta']['date']}), is the first of its series")
    assert no_pair_text(session) in said


def test_the_export_is_one_offline_file_of_the_same_model(
        client: Any, auth: Any, reference: dict[str, Any]) -> None:
    import re

    ids = [client.post("/api/v1/reports", json=body, headers=auth("ingest")).json()["id"]
           for body in (reference, _other_gpu(reference))]
    got = client.get("/api/v1/platforms/export.html")  # default pick: newest first
    assert got.status_code == 200, got.text
    html = got.text
    assert f'filename="moescope-platforms-{ids[1]}-{ids[0]}.html"' in \
        got.headers["content-disposition"]
    model = client.get("/api/v1/platforms").json()
    assert model["headline"] in html
    charts = re.findall(r'data-chart="(chart-[a-z0-9-]+)"', html)
    groups = {(r["configuration"]["mode"], r["configuration"]["category"])
              for r in model["rows"]}
    assert len(charts) == len(groups) + 1  # a bar chart per (mode, category), one scatter
    winners, detail = html.split('id="export-platforms-winners"')[1].split(
        'id="export-platforms-detail"')
    assert detail.count('class="not-run"') == 1
    # Under each platform every variant of the reports, for every configuration: a cell
    # for each, "not run" where that platform has no such case (the H200 lacks one).
    configs = {_config(c) for c in reference["cases"]}
    variants = {(c["precision"], c["pipeline"]) for c in reference["cases"]}
    n = len(reference["cases"])
    cells = [(c, t) for c, t in re.findall(r'<td class="([a-z -]*)">([^<]*)', winners)
             if c != "case-id"]
    assert len(cells) == 2 * len(configs) * len(variants)
    assert [t for c, t in cells if "not-run" in c.split()] == \
        ["not run"] * (2 * len(configs) * len(variants) - (2 * n - 1))
    assert 'colspan="4" class="platform-head">H200 #' in winners
    assert not re.search(r'<(script|link|img)[^>]* (src|href)=', html)  # nothing loaded
    assert client.get(f"/api/v1/platforms/export.html?reports={ids[0]}&baseline={ids[1]}"
                      ).status_code == 422


def _config(case: dict[str, Any]) -> tuple[Any, ...]:
    return (case["mode"], case["ep"], case["category"], case["F"], float(case["imbalance"]))


def _tied_inputs() -> tuple[Raw, Raw]:
    """_inputs, the H200's cases given a 3 % window spread, and one configuration's
    fastest H200 case set 1.5 % under the GB300's fastest there: a tie within noise."""
    from ingest.ties import NEVER_BEST

    a, b, _, _ = _inputs()
    cases = [dict(c, windowSpreadPercent=3.0) for c in b.cases]
    target = _config(cases[1])
    top = max(float(c["usefulTFPerGPU"]) for c in a.cases if _config(c) == target
              and not NEVER_BEST & {k["code"] for k in c.get("caveats", [])})
    fastest = max((c for c in cases if _config(c) == target),
                  key=lambda c: float(c["usefulTFPerGPU"]))
    fastest["usefulTFPerGPU"] = top * 0.985
    return a, Raw(b.platform, cases)


def _expected_winners(inputs: list[Raw]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Per configuration, computed from the cases alone: each (platform, variant)'s useful
    TF/GPU (None: not run), the fastest eligible cell and those within the larger noise."""
    from ingest.ties import NEVER_BEST

    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for i, given in enumerate(inputs):
        for case in given.cases:
            slot = out.setdefault(_config(case), {"tf": {}, "noise": {}, "eligible": set()})
            cell = (i, case["precision"], case["pipeline"])
            slot["tf"][cell] = case.get("usefulTFPerGPU")
            slot["noise"][cell] = case.get("windowSpreadPercent") or 0.0
            if case.get("usefulTFPerGPU") is not None and not NEVER_BEST & {
                    k["code"] for k in case.get("caveats", [])}:
                slot["eligible"].add(cell)
    for slot in out.values():
        eligible = sorted(slot["eligible"], key=lambda c: -slot["tf"][c])
        slot["best"], slot["ties"] = None, set()
        if len(eligible) >= 2:
            best = eligible[0]
            top = slot["tf"][best]
            slot["best"] = best
            slot["ties"] = {c for c in eligible if abs(top - slot["tf"][c]) / top
                            <= max(slot["noise"][c], slot["noise"][best]) / 100}
    return out


def test_winner_matrix_a_row_per_configuration_variants_under_each_platform() -> None:
    a, b = _tied_inputs()
    page = _build([a, b], baseline=0)
    matrix = page.winners
    variants = {(c["precision"], c["pipeline"]) for c in a.cases}
    # Platform by platform, each with one column per variant any picked report ran.
    assert [c.platform for c in matrix.columns] == [0] * len(variants) + [1] * len(variants)
    assert {(c.precision, c.pipeline) for c in matrix.columns[:len(variants)]} == variants
    assert [(c.precision, c.pipeline) for c in matrix.columns[:len(variants)]] == \
        [(c.precision, c.pipeline) for c in matrix.columns[len(variants):]]
    expected = _expected_winners([a, b])
    assert len(matrix.rows) == len(expected) == 18
    ties = clear = not_run = 0
    for row in matrix.rows:
        c = row.configuration
        want = expected[(c.mode, c.ep, c.category, c.F, c.imbalance)]
        for column, cell in zip(matrix.columns, row.cells, strict=True):
            key = (column.platform, column.precision, column.pipeline)
            if key not in want["tf"]:
                assert cell.useful_tf is None and cell.reason == "not run"
                not_run += 1
                continue
            assert cell.useful_tf == want["tf"][key]
            assert cell.best == (key == want["best"])
            assert cell.tied == (len(want["ties"]) > 1 and key in want["ties"]), (row, key)
        ties += len(want["ties"]) > 1
        clear += want["best"] is not None and len(want["ties"]) == 1
    # The dropped case, and nvfp4 · mega, run for half the configurations, on both.
    assert not_run == 1 + 2 * 9
    assert ties >= 1 and clear >= 1


def test_winner_matrix_in_markdown_csv_and_page_texts() -> None:
    import csv
    import io

    from app.services import platforms_text as texts

    a, b = _tied_inputs()
    page = _build([a, b])
    matrix = page.winners
    text = texts.platforms_markdown(page)
    head = next(line for line in text.splitlines() if line.startswith("| configuration |"))
    assert head.count("|") == len(matrix.columns) + 2
    assert "| GB300 NVL72 #1 bf16 · standard |" in head and "H200 #9 nvfp4 · mega |" in head
    above = text.split("Geometric mean")[0].splitlines()
    table = [line for line in above if line.startswith(("| inference ", "| training "))]
    assert len(table) == len(matrix.rows)
    assert sum(line.count("**") // 2 for line in table) == sum(
        c.best and not c.tied for r in matrix.rows for c in r.cells)
    assert sum(line.count("≈") for line in table) == sum(
        c.tied for r in matrix.rows for c in r.cells)
    # The CSV's lines carry the configuration's marks, the same as the matrix's cells.
    won = {(r.configuration.mode, r.configuration.ep, r.configuration.category,
            r.configuration.F, r.configuration.imbalance, col.precision, col.pipeline,
            page.platforms[col.platform].report_id): (int(cell.best), int(cell.tied))
           for r in matrix.rows for col, cell in zip(matrix.columns, r.cells, strict=True)}
    for line in csv.DictReader(io.StringIO(texts.platforms_csv(page))):
        key = (line["mode"], int(line["ep"]), line["category"], int(line["F"]),
               float(line["imbalance"]), line["precision"], line["pipeline"],
               int(line["report_id"]))
        assert (int(line["best_of_configuration"]),
                int(line["tied_of_configuration"])) == won[key]
    platforms, variants = texts.winner_head(page)
    assert platforms == [("GB300 NVL72 #1", 4), ("H200 #9", 4)]
    assert variants[:4] == variants[4:] and len(variants) == 8
    cells = [cell for _, row in texts.winner_rows(page) for cell in row]
    assert sum(t == "not run" for _, t in cells) == 1 + 2 * 9
    assert all(cls == "tied" for cls, t in cells if t.startswith("≈ "))
    assert all(cls == "best" for cls, t in cells if t.startswith("best "))
