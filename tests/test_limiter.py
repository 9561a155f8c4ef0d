"""What bounds each case: the utilisations and the limiter against arithmetic written here
from the reference's own numbers, on SQLite and Postgres, and the migration that derives
them (and the traffic caveats) for reports stored before it."""

from __future__ import annotations

import copy
import statistics
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from api_helpers import REPORTS
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, pool, select, text

from app.case_view import case_view
from app.models import CaseRow, CaveatRow
from app.services.summary import summary_rows
from db.migrate import downgrade, upgrade

Auth = Callable[[str], dict[str, str]]
Body = dict[str, Any]
# The reference's meta: compute peaks bf16 2500, mxfp8 5000, nvfp4 15000 TFLOP/s; HBM 8000
# GB/s; NVLink 900 GB/s per direction.
PEAK = {"bf16": 2500.0, "mxfp8": 5000.0, "nvfp4": 15000.0}


def approx(value: float) -> Any:
    return pytest.approx(value, rel=1e-12)


@pytest.fixture
def cases(client: TestClient, auth: Auth, reference: Body) -> dict[str, Body]:
    posted = client.post(REPORTS, json=reference, headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    listed = client.get(f"{REPORTS}/{posted.json()['id']}/cases", params={"limit": 1000})
    assert listed.status_code == 200
    return {c["id"]: c for c in listed.json()["items"]}


# The reference's shape: T 2048, D 7168, E 384, K 6 (TK = 12288 rows per rank).
SHAPE = {"T": 2048, "D": 7168, "E": 384, "K": 6}
ELEMENT = {"bf16": 2.0, "mxfp8": 33 / 32, "nvfp4": 9 / 16}


def _hot(case: Body) -> float:
    rows = case["receiveRows"]
    return max(rows) / (sum(rows) / len(rows))


def _busiest_hbm_percent(case: Body) -> float:
    """DESIGN.md's hbmUtilPercent written out again: the busiest rank's rows R in the
    activation term, all E/ep experts' weights, over the layer time, of 8000 GB/s."""
    t, d, e, k = SHAPE["T"], SHAPE["D"], SHAPE["E"], SHAPE["K"]
    rows, f = max(case["receiveRows"]), case["F"]
    weights = (e // case["ep"]) * 3 * d * f * ELEMENT[case["precision"]] if rows else 0
    forward = t * d * 2 + rows * (2 * d + 4 * f) + weights + t * k * 4
    total = forward * (3 if case["mode"] == "training" else 1)
    return total / (case["layerMS"] / 1000) / 1e9 / 8000 * 100


def test_shape_is_the_references(reference: Body) -> None:
    assert {k: reference["meta"]["shape"][k] for k in SHAPE} == SHAPE


def test_utilisations_and_limiter_by_hand(cases: dict[str, Body], reference: Body) -> None:
    raw = {c["id"]: c for c in reference["cases"]}
    # The issue's case: the busiest of 32 ranks receives 4.00 x the mean rows and runs at
    # 1366.6 / 2500 x 4 = 62 % of the bf16 peak while the mean rank shows 15.6 %.
    key = "training-ep32-bf16-standard-single_layer-F3072-i4"
    c = cases[key]
    assert _hot(raw[key]) == pytest.approx(4.0, abs=0.005)
    assert c["hotRankFactor"] == approx(_hot(raw[key]))
    assert c["computeUtilPercent"] == approx(raw[key]["usefulTFPerGPU"] / 2500 * 100
                                             * _hot(raw[key]))
    assert 62 < c["computeUtilPercent"] < 63 and c["percentOfPeak"] < 16
    assert c["imbalanceLossPercent"] == approx((1 - 1 / _hot(raw[key])) * 100)
    assert c["hbmUtilPercent"] == approx(_busiest_hbm_percent(raw[key]))
    assert c["limiter"] == "compute"

    # Balanced (i1): the busiest rank is the mean rank, so HBM util equals the analytical
    # HBM figure: 4703.43 / 8000 = 58.8 %, beating 45.6 % compute and 23.7 % NVLink.
    key = "inference-ep8-bf16-standard-single_layer-F3072-i1"
    c = cases[key]
    assert c["hotRankFactor"] == 1.0 and c["imbalanceLossPercent"] == 0.0
    assert c["computeUtilPercent"] == approx(1139.9839390712232 / 2500 * 100)
    assert c["hbmUtilPercent"] == pytest.approx(4703.434270325753 / 8000 * 100, rel=1e-9)
    assert c["nvlinkUtilPercent"] == approx(213.55297075836768 / 900 * 100)
    assert c["limiter"] == "hbm"
    assert c["communicationSharePercent"] is None  # the reference has no phaseMS

    # nvfp4 EP8 i8: every row goes to rank 0 (8 x the mean); its link 381.27 / 900 = 42.4 %.
    key = "inference-ep8-nvfp4-mega-single_layer-F3072-i8"
    c = cases[key]
    assert c["hotRankFactor"] == 8.0
    assert c["nvlinkUtilPercent"] == approx(381.27118983581255 / 900 * 100)
    assert c["computeUtilPercent"] == approx(raw[key]["usefulTFPerGPU"] / 15000 * 100 * 8)
    assert c["limiter"] == "nvlink"


def _by_hand(case: Body) -> tuple[str, float]:
    """DESIGN.md's rule written out again: the highest of the busiest rank's utilisations."""
    utilisations = {
        "compute": case["usefulTFPerGPU"] / PEAK[case["precision"]] * 100 * _hot(case),
        "hbm": _busiest_hbm_percent(case),
        "nvlink": max(case["nvlinkMaxTXGBps"], case["nvlinkMaxRXGBps"]) / 900 * 100,
    }
    roof = max(utilisations, key=lambda name: utilisations[name])
    return roof, utilisations[roof]


def _mean_rank(case: Body) -> str:
    """The rule before: the mean rank's utilisations."""
    utilisations = {
        "compute": case["usefulTFPerGPU"] / PEAK[case["precision"]] * 100,
        "hbm": case["analyticalHBMGBps"] / 8000 * 100,
        "nvlink": max(case["nvlinkMaxTXGBps"], case["nvlinkMaxRXGBps"]) / 900 * 100,
    }
    roof = max(utilisations, key=lambda name: utilisations[name])
    return roof if utilisations[roof] >= 25 else "latency"


def test_reference_limiter_counts(cases: dict[str, Body], reference: Body) -> None:
    expected = Counter(
        roof if share >= 25 else "latency" for roof, share in map(_by_hand, reference["cases"]))
    assert expected == {"compute": 46, "nvlink": 12, "hbm": 5}
    assert Counter(c["limiter"] for c in cases.values()) == expected
    # What the issue counts: of the mean rank's 36 latency and NVLink verdicts, 24 are
    # compute on the busiest rank.
    before = {c["id"]: _mean_rank(c) for c in reference["cases"]}
    judged = [c for c in reference["cases"] if before[c["id"]] in ("latency", "nvlink")]
    assert len(judged) == 36
    assert sum(1 for c in judged if cases[c["id"]]["limiter"] == "compute") == 24
    for raw in reference["cases"]:
        c = cases[raw["id"]]
        roof, share = _by_hand(raw)
        assert c["limiter"] == (roof if share >= 25 else "latency"), raw["id"]
        assert c["computeUtilPercent"] == approx(c["percentOfPeak"] * _hot(raw))
        assert c["hbmUtilPercent"] == pytest.approx(_busiest_hbm_percent(raw), rel=1e-9)


def test_limiter_filters_and_sorts(client: TestClient, cases: dict[str, Body]) -> None:
    report_id = client.get(REPORTS).json()["items"][0]["id"]
    listed = client.get(f"{REPORTS}/{report_id}/cases",
                        params={"limiter": "nvlink", "sort": "nvlinkUtilPercent"})
    assert listed.status_code == 200, listed.text
    items = listed.json()["items"]
    assert len(items) == 12 and {c["limiter"] for c in items} == {"nvlink"}
    shares = [c["nvlinkUtilPercent"] for c in items]
    assert shares == sorted(shares)
    bad = client.get(f"{REPORTS}/{report_id}/cases", params={"limiter": "disk"})
    assert bad.status_code == 422 and "limiter" in bad.text


def test_communication_share_from_phases(client: TestClient, auth: Auth,
                                         reference: Body) -> None:
    case = copy.deepcopy(reference["cases"][0])
    case["phaseMS"] = {"dispatch": 0.3, "experts": 0.9, "combine": 0.5, "route": 0.3,
                       "quantize": 0.2}
    posted = client.post(REPORTS, json={"meta": reference["meta"], "cases": [case]},
                         headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    got = client.get(f"{REPORTS}/{posted.json()['id']}/cases/{case['id']}").json()
    # quantize is part of the forward: 0.8 of 2.2 ms.
    assert got["communicationSharePercent"] == approx(
        (0.3 + 0.5) / (0.3 + 0.9 + 0.5 + 0.3 + 0.2) * 100)


def _snapshot(engine: Engine) -> dict[str, Any]:
    with engine.connect() as connection:
        rows = connection.execute(select(
            CaseRow.case_id, CaseRow.compute_util_percent, CaseRow.hbm_util_percent,
            CaseRow.nvlink_util_percent, CaseRow.limiter, CaseRow.communication_share_percent,
            CaseRow.hot_rank_factor, CaseRow.imbalance_loss_percent,
            CaseRow.percent_of_measured_ceiling,
        ).order_by(CaseRow.case_id)).all()
        caveats = connection.execute(
            select(CaseRow.case_id, CaveatRow.code, CaveatRow.message)
            .join(CaseRow, CaseRow.id == CaveatRow.case_pk).order_by(CaveatRow.id)).all()
    by_case: dict[str, list[tuple[str, str]]] = {}
    for case_id, code, message in caveats:
        by_case.setdefault(case_id, []).append((code, message))
    return {"columns": [tuple(r) for r in rows], "caveats": by_case}


def test_migration_derives_stored_reports(client: TestClient, auth: Auth, reference: Body,
                                          database_url: str, engine: Engine) -> None:
    case = copy.deepcopy(reference["cases"][1])
    case.update(id="phased", phaseMS={"dispatch": 0.2, "experts": 0.6, "combine": 0.2})
    silent = copy.deepcopy(reference["cases"][2])
    silent.update(id="silent", nvlinkMaxTXGBps=0.0, nvlinkMaxRXGBps=0.0, nvlinkTXGBps=0.0,
                  nvlinkRXGBps=0.0, logicalForwardPayloadBytesRank0=0,
                  forwardFlopsPerLogicalPayloadByteRank0=None)
    reference["cases"] += [case, silent]
    posted = client.post(REPORTS, json=reference, headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    fresh = _snapshot(engine)  # what ingest derives today

    migrations = create_engine(database_url, poolclass=pool.NullPool)
    try:
        downgrade(database_url, "0002")
        with migrations.connect() as connection:
            old = Counter(connection.execute(text("SELECT code FROM caveats")).scalars())
        # Revision 0002's rule: EP > 1 and nothing leaving rank 0 (the four EP8 i8 cases,
        # and the crafted silent one).
        assert old["local_only_payload"] == 5 and old["hot_rank"] == 0
        upgrade(database_url)
    finally:
        migrations.dispose()
    assert _snapshot(engine) == fresh
    assert fresh["caveats"]["silent"] == [("no_ep_traffic", "no rank sent a row to another: "
                                           "the case measured no EP traffic")]
    assert sum(1 for c in fresh["caveats"].values() for code, _ in c if code == "hot_rank") == 28


def test_summary_counts_each_limiter_per_mode_precision_pipeline(
    cases: dict[str, Body], reference: Body,
) -> None:
    rows = summary_rows([case_view(c) for c in cases.values()])
    assert [(r.mode, r.precision, r.pipeline) for r in rows] == [
        ("inference", "bf16", "standard"), ("inference", "mxfp8", "staged"),
        ("inference", "mxfp8", "mega"), ("inference", "nvfp4", "mega"),
        ("training", "bf16", "standard"), ("training", "mxfp8", "staged"),
        ("training", "mxfp8", "mega")]
    for row in rows:
        group = [c for c in reference["cases"]
                 if (c["mode"], c["precision"], c["pipeline"]) == (row.mode, row.precision,
                                                                  row.pipeline)]
        want = Counter(roof if share >= 25 else "latency" for roof, share in map(_by_hand, group))
        assert {k: v for k, v in row.limiters.items() if v} == want
        assert row.median_layer_ms == approx(statistics.median(c["layerMS"] for c in group))
    # nvfp4 inference: all nine bound by NVLink or latency, none by its 15 PFLOP/s roof.
    nvfp4 = next(r for r in rows if r.precision == "nvfp4")
    assert nvfp4.limiters["compute"] == 0


def test_0007_derives_the_busiest_rank_both_ways(client: TestClient, auth: Auth, reference: Body,
                                                database_url: str, engine: Engine) -> None:
    """A report stored at head, taken down to 0006 (the mean rank's figures) and up again."""
    key = "training-ep32-bf16-standard-single_layer-F3072-i4"
    hot = next(c for c in reference["cases"] if c["id"] == key)
    hot["phaseMS"] = {"dispatch": 0.2, "experts": 0.6, "combine": 0.2, "quantize": 0.5}
    experts = SHAPE["E"] // hot["ep"]
    rows = -(-max(hot["receiveRows"]) // experts)
    # A ceiling at the busiest rank's shape that its useful rate (4 x the mean's) exceeds.
    ceiling = hot["usefulTFPerGPU"] * 2
    reference["meta"]["measuredCeilings"] = {"denseTF": {"bf16": 2500.0}, "grouped": [
        {"precision": "bf16", "experts": experts, "rowsPerExpert": rows, "D": SHAPE["D"],
         "F": hot["F"], "tf": ceiling, "kernel": "k"}]}
    posted = client.post(REPORTS, json=reference, headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    fresh = _snapshot(engine)
    served = client.get(f"{REPORTS}/{posted.json()['id']}/cases/{key}").json()
    assert served["percentOfMeasuredCeiling"] == approx(50.0 * _hot(hot))
    assert "above_ceiling" in [c["code"] for c in served["caveats"]]
    assert served["communicationSharePercent"] == approx(0.4 / 1.5 * 100)

    migrations = create_engine(database_url, poolclass=pool.NullPool)
    try:
        downgrade(database_url, "0006")
        with migrations.connect() as connection:
            old = connection.execute(text(
                "SELECT compute_util_percent, percent_of_peak, percent_of_measured_ceiling, "
                "communication_share_percent, limiter FROM cases WHERE case_id = :k"),
                {"k": key}).one()
            codes = list(connection.execute(text(
                "SELECT code FROM caveats JOIN cases ON cases.id = caveats.case_pk "
                "WHERE case_id = :k ORDER BY caveats.id"), {"k": key}).scalars())
        # 0006's rules: the mean rank (compute = % of peak, 15.6 %: latency), the ceiling
        # over the mean rank's rate (50 %), quantize not counted (0.4 of 1.0 ms).
        assert old[0] == old[1] and old[2] == approx(50.0) and old[3] == approx(40.0)
        assert old[4] == "latency" and "above_ceiling" not in codes
        upgrade(database_url)
    finally:
        migrations.dispose()
    assert _snapshot(engine) == fresh
