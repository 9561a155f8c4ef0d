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

from app.export.summary import summary_rows
from app.models import CaseRow, CaveatRow
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


def test_utilisations_and_limiter_by_hand(cases: dict[str, Body]) -> None:
    # bf16 EP8 i1: 1139.98 / 2500 = 45.6 %, 4703.43 / 8000 = 58.8 %, busiest link
    # max(213.5529, 213.5530) / 900 = 23.7 %: HBM is the highest, over 25 %.
    c = cases["inference-ep8-bf16-standard-single_layer-F3072-i1"]
    assert c["computeUtilPercent"] == approx(1139.9839390712232 / 2500 * 100)
    assert c["hbmUtilPercent"] == approx(4703.434270325753 / 8000 * 100)
    assert c["nvlinkUtilPercent"] == approx(213.55297075836768 / 900 * 100)
    assert c["limiter"] == "hbm"
    assert c["communicationSharePercent"] is None  # the reference has no phaseMS

    # nvfp4 EP8 i8: 3.3 %, 2.2 %, and the busiest rank's TX 381.27 / 900 = 42.4 %.
    c = cases["inference-ep8-nvfp4-mega-single_layer-F3072-i8"]
    assert c["nvlinkUtilPercent"] == approx(381.27118983581255 / 900 * 100)
    assert c["limiter"] == "nvlink"

    # bf16 training EP32 i1: 1366.61 / 2500 = 54.7 % beats 20.4 % and 21.5 %.
    c = cases["training-ep32-bf16-standard-single_layer-F3072-i1"]
    assert c["computeUtilPercent"] == approx(1366.6132342177868 / 2500 * 100)
    assert c["limiter"] == "compute"

    # bf16 EP8 i4: 14.6 %, 18.8 %, 156.03 / 900 = 17.3 %: no roof reaches 25 %.
    c = cases["inference-ep8-bf16-standard-single_layer-F3072-i4"]
    assert max(c["computeUtilPercent"], c["hbmUtilPercent"], c["nvlinkUtilPercent"]) < 25
    assert c["hbmUtilPercent"] == approx(1501.2394553233682 / 8000 * 100)
    assert c["limiter"] == "latency"


def _by_hand(case: Body) -> tuple[str, float]:
    """DESIGN.md's rule written out again: the highest of the three utilisations."""
    utilisations = {
        "compute": case["usefulTFPerGPU"] / PEAK[case["precision"]] * 100,
        "hbm": case["analyticalHBMGBps"] / 8000 * 100,
        "nvlink": max(case["nvlinkMaxTXGBps"], case["nvlinkMaxRXGBps"]) / 900 * 100,
    }
    roof = max(utilisations, key=lambda name: utilisations[name])
    return roof, utilisations[roof]


def test_reference_limiter_counts(cases: dict[str, Body], reference: Body) -> None:
    highest = Counter(_by_hand(c)[0] for c in reference["cases"])
    # What the issue states, by the highest-utilisation rule alone.
    assert highest == {"compute": 24, "hbm": 6, "nvlink": 33}
    # Then the 25 % rule turns 16 of them (2 compute, 1 HBM, 13 NVLink) into latency.
    expected = Counter(
        roof if share >= 25 else "latency" for roof, share in map(_by_hand, reference["cases"]))
    assert expected == {"compute": 22, "hbm": 5, "nvlink": 20, "latency": 16}
    assert Counter(c["limiter"] for c in cases.values()) == expected
    for raw in reference["cases"]:
        c = cases[raw["id"]]
        roof, share = _by_hand(raw)
        assert c["limiter"] == (roof if share >= 25 else "latency"), raw["id"]
        assert c["computeUtilPercent"] == c["percentOfPeak"]
        assert c["hbmUtilPercent"] == approx(raw["analyticalHBMGBps"] / 8000 * 100)


def test_limiter_filters_and_sorts(client: TestClient, cases: dict[str, Body]) -> None:
    report_id = client.get(REPORTS).json()["items"][0]["id"]
    listed = client.get(f"{REPORTS}/{report_id}/cases",
                        params={"limiter": "latency", "sort": "nvlinkUtilPercent"})
    assert listed.status_code == 200, listed.text
    items = listed.json()["items"]
    assert len(items) == 16 and {c["limiter"] for c in items} == {"latency"}
    shares = [c["nvlinkUtilPercent"] for c in items]
    assert shares == sorted(shares)
    bad = client.get(f"{REPORTS}/{report_id}/cases", params={"limiter": "disk"})
    assert bad.status_code == 422 and "limiter" in bad.text


def test_communication_share_from_phases(client: TestClient, auth: Auth,
                                         reference: Body) -> None:
    case = copy.deepcopy(reference["cases"][0])
    case["phaseMS"] = {"dispatch": 0.3, "experts": 0.9, "combine": 0.5, "route": 0.3}
    posted = client.post(REPORTS, json={"meta": reference["meta"], "cases": [case]},
                         headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    got = client.get(f"{REPORTS}/{posted.json()['id']}/cases/{case['id']}").json()
    assert got["communicationSharePercent"] == approx((0.3 + 0.5) / (0.3 + 0.9 + 0.5 + 0.3) * 100)


def _snapshot(engine: Engine) -> dict[str, Any]:
    with engine.connect() as connection:
        rows = connection.execute(select(
            CaseRow.case_id, CaseRow.compute_util_percent, CaseRow.hbm_util_percent,
            CaseRow.nvlink_util_percent, CaseRow.limiter, CaseRow.communication_share_percent,
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
    rows = summary_rows(list(cases.values()))
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
