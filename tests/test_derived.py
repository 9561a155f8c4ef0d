"""Derived metrics and caveats: reference cases checked against arithmetic written out by
hand from their raw fields, crafted cases for every caveat code, the report-level notes,
and the pure functions of ``ingest.derived``."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from api_helpers import REPORTS
from fastapi.testclient import TestClient

from ingest.derived import (
    CAVEAT_CODES,
    NOTE_QUALIFIES,
    caveats,
    derive,
    observed_imbalance,
    report_notes,
    window_spread_percent,
)
from ingest.schema import Case, Meta

Auth = Callable[[str], dict[str, str]]
Body = dict[str, Any]


def approx(value: float) -> Any:
    return pytest.approx(value, rel=1e-12)


@pytest.fixture
def reference_id(client: TestClient, auth: Auth, reference: Body) -> int:
    response = client.post(REPORTS, json=reference, headers=auth("ingest"))
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def _case(client: TestClient, report_id: int, case_id: str) -> Body:
    response = client.get(f"{REPORTS}/{report_id}/cases/{case_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_reference_cases_match_hand_arithmetic(client: TestClient, reference_id: int) -> None:
    # The meta's peaks: bf16 2500, mxfp8 5000, nvfp4 15000 TFLOP/s; HBM 8000 GB/s;
    # NVLink 900 GB/s per direction.

    # bf16, EP8, uniform routing.
    c = _case(client, reference_id, "inference-ep8-bf16-standard-single_layer-F3072-i1")
    assert c["usefulTFPerGPU"] == 1139.9839390712232
    assert c["percentOfPeak"] == approx(1139.9839390712232 / 2500 * 100)  # 45.599 %
    assert c["hbmPercentOfPeak"] == approx(4703.434270325753 / 8000 * 100)
    assert c["nvlinkTXPercentOfPeak"] == approx(208.44604936541793 / 900 * 100)
    assert c["nvlinkRXPercentOfPeak"] == approx(208.44627592724788 / 900 * 100)
    # windows.combined = [1.38553, 1.40802, 1.42414, 1.43455, 1.43254]:
    # max 1.434552534421285, min 1.3855274637540183, median 1.4241407990455628.
    assert c["windowSpreadPercent"] == approx(
        (1.434552534421285 - 1.3855274637540183) / 1.4241407990455628 * 100  # 3.44 %
    )
    assert c["receiveRows"] == [12288] * 8
    assert c["observedImbalance"] == approx(12288 / (8 * 12288 / 8))  # 1.0
    assert c["caveats"] == []

    # mxfp8, EP8, imbalance 4: receiveRows sum to EP*T*K = 8*2048*6 = 98304, mean 12288.
    c = _case(client, reference_id, "inference-ep8-mxfp8-mega-single_layer-F3072-i4")
    assert c["percentOfPeak"] == approx(641.4679799196794 / 5000 * 100)
    assert c["receiveRows"] == [49152, 18169, 10151, 6716, 4875, 3752, 3007, 2482]
    assert 49152 + 18169 + 10151 + 6716 + 4875 + 3752 + 3007 + 2482 == 98304
    assert c["observedImbalance"] == approx(49152 / (98304 / 8))  # exactly 4.0
    # windows sorted already: median is the third, 2.530909864107768.
    assert c["windowSpreadPercent"] == approx(
        (2.536190931002299 - 2.482048002878825) / 2.530909864107768 * 100
    )

    # nvfp4, EP8, imbalance 4. windows.combined = [1.7569099, 1.7570240, 1.7557568,
    # 1.7570112, 1.7564544]: sorted, the median is the first, 1.7569098631540934.
    c = _case(client, reference_id, "inference-ep8-nvfp4-mega-single_layer-F3072-i4")
    assert c["percentOfPeak"] == approx(924.0642744035912 / 15000 * 100)
    assert c["windowSpreadPercent"] == approx(
        (1.7570240020751953 - 1.7557568113009134) / 1.7569098631540934 * 100
    )

    # bf16, EP8, imbalance 8: every row goes to rank 0; no payload leaves rank 0, but the
    # other seven ranks send theirs to it: a hot rank (8 x the mean), not a case without
    # EP traffic.
    c = _case(client, reference_id, "inference-ep8-bf16-standard-single_layer-F3072-i8")
    assert c["receiveRows"] == [98304, 0, 0, 0, 0, 0, 0, 0]
    assert c["observedImbalance"] == approx(98304 / (98304 / 8))  # 8.0
    # windows.combined = [8.33857, 8.48347, 8.96996, 8.74081, 8.75256]: median 8.7408...
    spread = (8.969963677724202 - 8.338570674260458) / 8.740808550516764 * 100  # 7.22 %
    assert c["windowSpreadPercent"] == approx(spread)
    assert {cv["code"] for cv in c["caveats"]} == {"noisy_windows", "hot_rank"}
    hot = next(cv for cv in c["caveats"] if cv["code"] == "hot_rank")
    assert "understates the busiest rank's link by 8.0 x" in hot["message"]

    # Training, EP32, imbalance 4: 32 ranks, sum 32*12288 = 393216, rank 0 gets 4*12288.
    c = _case(client, reference_id, "training-ep32-bf16-standard-single_layer-F3072-i4")
    assert c["backwardMS"] == 8.255635166168213
    assert c["percentOfPeak"] == approx(390.02993914302857 / 2500 * 100)
    assert c["hbmPercentOfPeak"] == approx(466.5499764554697 / 8000 * 100)
    assert len(c["receiveRows"]) == 32 and sum(c["receiveRows"]) == 393216
    assert max(c["receiveRows"]) == c["receiveRows"][0] == 49152
    assert c["observedImbalance"] == approx(49152 / (393216 / 32))  # 4.0
    # combined = [12.10373, 12.56603, 12.48748, 12.52098, 12.48044]: median 12.48748...
    assert c["windowSpreadPercent"] == approx(
        (12.566025543212891 - 12.103730138142904) / 12.487484741210938 * 100
    )
    # recompute is [false]: no layer recomputed; rank 0 receives 4 x the mean.
    assert [cv["code"] for cv in c["caveats"]] == ["hot_rank"]


def test_listing_carries_the_same_derived_fields(client: TestClient, reference_id: int) -> None:
    listed = client.get(f"{REPORTS}/{reference_id}/cases", params={"ep": 64, "mode": "training"})
    assert listed.status_code == 200
    items = listed.json()["items"]
    assert len(items) == 18
    for item in items:
        single = _case(client, reference_id, item["id"])
        assert item == single
        peak = {"bf16": 2500, "mxfp8": 5000}[item["precision"]]
        assert item["percentOfPeak"] == approx(item["usefulTFPerGPU"] / peak * 100)
        assert item["observedImbalance"] == approx(max(item["receiveRows"]) / 12288)


# Each crafted case is reference case 0 (which has no caveat) with a few fields changed.
GPU_STATE = {"smClockMinMHz": 1500.0, "smClockMaxMHz": 1980.0, "powerMaxW": 690.0,
             "temperatureMaxC": 71.0, "throttleReasons": 0, "samples": 12}
CRAFTED: dict[str, tuple[dict[str, Any], set[str]]] = {
    "base": ({}, set()),
    "numerics": ({"numericalAccepted": False}, {"numerical_not_accepted"}),
    "graph": ({"graphAccepted": False}, {"graph_not_accepted"}),
    "oom": ({"ooms": 2}, {"oom"}),
    "retries": ({"allocationRetries": 3}, {"allocation_retries"}),
    "recompute": ({"recompute": [False, True]}, {"recompute"}),
    "no-recompute": ({"recompute": [False, False]}, set()),
    # spread (1.06 - 1.0) / 1.0 = 6 % > 5 %; then 4 %.
    "noisy": ({"windows": {"combined": [1.0, 1.06, 1.0]}}, {"noisy_windows"}),
    "quiet": ({"windows": {"combined": [1.0, 1.04, 1.0]}}, set()),
    # Rank 0 sending nothing is not a case without EP traffic: the other ranks may send.
    "rank0-silent": ({"logicalForwardPayloadBytesRank0": 0,
                      "forwardFlopsPerLogicalPayloadByteRank0": None}, set()),
    "no-traffic": ({"nvlinkMaxTXGBps": 0.0, "nvlinkMaxRXGBps": 0.0, "nvlinkTXGBps": 0.0,
                    "nvlinkRXGBps": 0.0}, {"no_ep_traffic"}),
    "no-traffic-ep1": ({"ep": 1, "nvlinkMaxTXGBps": 0.0, "nvlinkMaxRXGBps": 0.0,
                        "nvlinkTXGBps": 0.0, "nvlinkRXGBps": 0.0}, set()),
    # receiveRows sum to 98304, mean 12288: 24576 is 2 x the mean, 24575 just under.
    "hot-rank": ({"receiveRows": [24576, *[10533] * 6, 10530]}, {"hot_rank"}),
    "warm-rank": ({"receiveRows": [24575, *[10533] * 6, 10531]}, set()),
    "no-peak": ({"precision": "fp6"}, {"no_peak"}),
    "nvlink-null": ({"nvlinkTXGBps": None, "nvlinkRXGBps": None, "nvlinkMaxTXGBps": None,
                     "nvlinkMaxRXGBps": None}, {"nvlink_not_measured"}),
    "above-peak": ({"usefulTFPerGPU": 2600.0}, {"above_peak"}),
    # The crafted meta measures a 10 TFLOP/s ceiling at this F alone (crafted_meta).
    "above-ceiling": ({"F": 6144}, {"above_ceiling"}),
    "emulated": ({"precision": "mxfp8", "emulated": True}, {"emulated"}),
    # Emulated speed is never compared with the peak, even when it exceeds it.
    "emulated-fast": ({"precision": "mxfp8", "emulated": True, "usefulTFPerGPU": 6000.0},
                      {"emulated"}),
    "emulated-no-peak": ({"precision": "fp6", "emulated": True}, {"emulated", "no_peak"}),
    # NVML reason bits: 0x8 HW slowdown, 0x20/0x40 SW/HW thermal, 0x80 HW power brake
    # throttle; 0x4 SW power cap (the power limit, gpuState.powerCapped), 0x1 GPU idle and
    # 0x2 application clocks setting do not.
    "power-capped": ({"gpuState": {**GPU_STATE, "throttleReasons": 0x4 | 0x1,
                                   "powerCapped": True}}, set()),
    "hot": ({"gpuState": {**GPU_STATE, "throttleReasons": 0x40 | 0x4}}, {"throttled"}),
    "slowdown": ({"gpuState": {**GPU_STATE, "throttleReasons": 0x8}}, {"throttled"}),
    "power-brake": ({"gpuState": {**GPU_STATE, "throttleReasons": 0x80}}, {"throttled"}),
    "soft-thermal": ({"gpuState": {**GPU_STATE, "throttleReasons": 0x20}}, {"throttled"}),
    "idle-bits": ({"gpuState": {**GPU_STATE, "throttleReasons": 0x1 | 0x2}}, set()),
    "expert-loop": ({"expertKernel": "loop"}, {"expert_loop"}),
    "scaled-loop": ({"expertKernel": "scaled_mm_loop"}, {"expert_loop"}),
    "grouped": ({"expertKernel": "grouped_mm"}, set()),
    "failed": ({"failure": "rank 1, numerics phase: RuntimeError: shape rejected"},
               {"failed"}),
    "several": ({"ooms": 1, "graphAccepted": False, "nvlinkRXGBps": None},
                {"oom", "graph_not_accepted", "nvlink_not_measured"}),
}


@pytest.fixture
def crafted_id(client: TestClient, auth: Auth, reference: Body) -> int:
    base = reference["cases"][0]
    cases = []
    for name, (changes, _) in CRAFTED.items():
        case = copy.deepcopy(base)
        case.update(copy.deepcopy(changes))
        case["id"] = name
        cases.append(case)
    response = client.post(REPORTS, json={"meta": crafted_meta(reference), "cases": cases},
                           headers=auth("ingest"))
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def crafted_meta(reference: Body) -> Body:
    """The reference's meta with one grouped-GEMM ceiling, 10 TFLOP/s, at the first case's
    shape but F 6144: only the above-ceiling case is measured against it."""
    meta = copy.deepcopy(reference["meta"])
    base = reference["cases"][0]
    experts = meta["shape"]["E"] // base["ep"]
    meta["measuredCeilings"] = {"grouped": [{
        "precision": base["precision"], "experts": experts,
        "rowsPerExpert": -(-max(base["receiveRows"]) // experts), "D": meta["shape"]["D"],
        "F": 6144, "tf": 10.0, "kernel": "k"}]}
    return meta


def test_every_caveat_code_is_exercised() -> None:
    assert set().union(*(codes for _, codes in CRAFTED.values())) == set(CAVEAT_CODES)


def test_crafted_cases_carry_exactly_their_caveats(
    client: TestClient, crafted_id: int, reference: Body
) -> None:
    for name, (_, expected) in CRAFTED.items():
        case = _case(client, crafted_id, name)
        assert {c["code"] for c in case["caveats"]} == expected, name
        assert all(c["message"] for c in case["caveats"]), name

    useful = reference["cases"][0]["usefulTFPerGPU"]
    assert _case(client, crafted_id, "base")["percentOfPeak"] == approx(useful / 2500 * 100)
    # No peak for fp6, and emulated speed is not a percentage of any peak.
    for name in ("no-peak", "emulated", "emulated-fast", "emulated-no-peak"):
        assert _case(client, crafted_id, name)["percentOfPeak"] is None, name
    above = _case(client, crafted_id, "above-peak")
    assert above["percentOfPeak"] == approx(2600.0 / 2500 * 100)
    nvlink = _case(client, crafted_id, "nvlink-null")
    assert nvlink["nvlinkTXPercentOfPeak"] is None and nvlink["nvlinkRXPercentOfPeak"] is None
    several = _case(client, crafted_id, "several")
    assert several["nvlinkRXPercentOfPeak"] is None
    assert several["nvlinkTXPercentOfPeak"] == approx(208.44604936541793 / 900 * 100)
    noisy = _case(client, crafted_id, "noisy")
    assert noisy["windowSpreadPercent"] == approx((1.06 - 1.0) / 1.0 * 100)
    [caveat] = noisy["caveats"]
    assert "6.0 %" in caveat["message"]
    hot = _case(client, crafted_id, "hot")["caveats"][0]["message"]
    assert "hw_thermal" in hot and "sw_power_cap" not in hot
    assert "hw_slowdown" in _case(client, crafted_id, "slowdown")["caveats"][0]["message"]
    assert "hw_power_brake" in _case(client, crafted_id, "power-brake")["caveats"][0]["message"]
    assert _case(client, crafted_id, "power-capped")["gpuState"]["powerCapped"] is True
    assert "(loop)" in _case(client, crafted_id, "expert-loop")["caveats"][0]["message"]
    assert "2 out-of-memory" in _case(client, crafted_id, "oom")["caveats"][0]["message"]
    ceiling = _case(client, crafted_id, "above-ceiling")
    # The case is balanced (hot rank factor 1): its useful rate over 10 TFLOP/s.
    assert ceiling["percentOfMeasuredCeiling"] == approx(
        reference["cases"][0]["usefulTFPerGPU"] / 10.0 * 100)


def test_report_counts_caveats_per_code(client: TestClient, crafted_id: int) -> None:
    detail = client.get(f"{REPORTS}/{crafted_id}").json()
    expected: dict[str, int] = {}
    for _, codes in CRAFTED.values():
        for code in codes:
            expected[code] = expected.get(code, 0) + 1
    assert detail["summary"]["caveatCounts"] == expected


def test_report_caveats_are_every_note_verbatim(
    client: TestClient, auth: Auth, reference: Body
) -> None:
    meta = reference["meta"]
    meta["siteNote"] = "  Ran at site B; see the placement note.\nSecond line.  "
    response = client.post(REPORTS, json={"meta": meta, "cases": reference["cases"][:1]},
                           headers=auth("ingest"))
    assert response.status_code == 201, response.text
    notes = client.get(f"{REPORTS}/{response.json()['id']}").json()["caveats"]

    assert notes == [
        {"key": "peakNote", "qualifies": "% of peak", "text": meta["peakNote"]},
        {"key": "timingNote", "qualifies": "times and throughput", "text": meta["timingNote"]},
        {"key": "bandwidthNote", "qualifies": "NVLink and HBM", "text": meta["bandwidthNote"]},
        {"key": "placementNote", "qualifies": "every cross-EP comparison",
         "text": meta["placementNote"]},
        {"key": "memoryNote", "qualifies": "memory", "text": meta["memoryNote"]},
        {"key": "siteNote", "qualifies": None, "text": meta["siteNote"]},
    ]
    assert notes[3]["text"].startswith("Four separate allocations. EP64 training ran at")


# --- ingest.derived as pure functions -------------------------------------------------


def test_window_spread_percent() -> None:
    assert window_spread_percent([2.0, 1.0, 3.0]) == approx((3.0 - 1.0) / 2.0 * 100)
    # An even count: the median is the mean of the middle two, (2 + 3) / 2.
    assert window_spread_percent([1.0, 2.0, 3.0, 4.0]) == approx((4.0 - 1.0) / 2.5 * 100)
    assert window_spread_percent([5.0]) == 0.0
    assert window_spread_percent([]) is None


def test_ratios_that_overflow_are_no_value() -> None:
    # Finite inputs, an infinite ratio: JSON has no infinity, and a sort would put it first.
    assert window_spread_percent([1e-320, 1e-320, 1e308]) is None
    assert window_spread_percent([1e-300, 1e300, 1e300]) == approx((1e300 - 1e-300) / 1e300 * 100)


def test_overflowing_percentages_come_back_null(
    client: TestClient, auth: Auth, reference: Body
) -> None:
    body = {"meta": reference["meta"], "cases": reference["cases"][:2]}
    body["meta"]["theoreticalTFPerGPU"]["bf16"] = 1e-300  # case 0 is bf16
    body["cases"][0]["usefulTFPerGPU"] = 1e10  # 1e10 / 1e-300 * 100 overflows
    body["cases"][1]["windows"]["combined"] = [1e-320, 1e-320, 1e308]
    response = client.post(REPORTS, json=body, headers=auth("ingest"))
    assert response.status_code == 201, response.text
    report_id = response.json()["id"]
    first, second = client.get(f"{REPORTS}/{report_id}/cases").json()["items"]
    assert first["percentOfPeak"] is None and {c["code"] for c in first["caveats"]} == {
        "above_peak"}
    assert second["windowSpreadPercent"] is None
    assert second["percentOfPeak"] == approx(second["usefulTFPerGPU"] / 5000 * 100)
    detail = client.get(f"{REPORTS}/{report_id}").json()
    assert detail["bestPercentOfPeak"] == second["percentOfPeak"]


def test_observed_imbalance() -> None:
    assert observed_imbalance([30, 10, 10, 10]) == approx(30 / 15)
    assert observed_imbalance([7]) == 1.0
    assert observed_imbalance([0, 0]) is None
    assert observed_imbalance([]) is None


def test_derive_uses_the_reports_own_peaks(reference: Body) -> None:
    raw = copy.deepcopy(reference["cases"][0])
    meta = Meta.model_validate({**reference["meta"], "theoreticalTFPerGPU": {"bf16": 1000},
                                "theoreticalHBMGBps": None,
                                "theoreticalNVLinkGBpsPerDirection": 400})
    d = derive(meta, Case.model_validate(raw))
    assert d.percentOfPeak == approx(raw["usefulTFPerGPU"] / 1000 * 100)
    assert d.hbmPercentOfPeak is None
    assert d.nvlinkTXPercentOfPeak == approx(raw["nvlinkTXGBps"] / 400 * 100)
    assert d.as_dict()["observedImbalance"] == 1.0
    codes = [c.code for c in caveats(meta, Case.model_validate(raw), d)]
    assert codes == ["above_peak"]  # 1140 TFLOP/s over a 1000 peak


def test_caveats_without_measurements(reference: Body) -> None:
    meta = Meta.model_validate({"date": "2026-01-01", "gpu": "CPU", "shape": {
        "T": 8, "D": 16, "E": 4, "K": 2}})
    case = Case.model_validate({
        "id": "cpu", "mode": "inference", "ep": 1, "category": "c", "F": 32, "imbalance": 1,
        "precision": "bf16", "pipeline": "standard", "forwardMS": 2.0, "layerMS": 2.0,
        "windows": {"combined": [2.0]}, "usefulTFPerGPU": 0.001,
    })
    d = derive(meta, case)
    assert d.as_dict() == {
        "percentOfPeak": None, "percentOfMeasuredCeiling": None, "hbmPercentOfPeak": None,
        "nvlinkTXPercentOfPeak": None, "nvlinkRXPercentOfPeak": None,
        "windowSpreadPercent": 0.0, "observedImbalance": None, "hotRankFactor": None,
        "computeUtilPercent": None, "hbmUtilPercent": None, "nvlinkUtilPercent": None,
        "limiter": None, "imbalanceLossPercent": None, "communicationSharePercent": None,
    }
    assert [c.code for c in caveats(meta, case)] == ["no_peak", "nvlink_not_measured"]


def test_report_notes_pure(reference: Body) -> None:
    meta = {"zNote": "z", "peakNote": "p", "note": "not a *Note key", "Notes": "no",
            "gpu": "x"}
    notes = report_notes(meta)
    assert [(n.key, n.qualifies, n.text) for n in notes] == [
        ("zNote", None, "z"), ("peakNote", NOTE_QUALIFIES["peakNote"], "p"),
    ]
    assert [n.key for n in report_notes(reference["meta"])] == [
        "peakNote", "timingNote", "bandwidthNote", "placementNote", "memoryNote",
    ]


def test_an_fp8_report_ingests_and_derives(client: TestClient, auth: Auth,
                                           reference: Body) -> None:
    """An H200 report with one native fp8 case: % of the dense FP8 peak (1,979) and the
    busiest rank's HBM bytes with fp8 weights at 1 + 4/128² bytes an element, by hand."""
    body = copy.deepcopy(reference)
    meta = body["meta"]
    meta.update(gpu="NVIDIA H200", theoreticalTFPerGPU={"bf16": 989, "fp8": 1979},
                theoreticalHBMGBps=4800)
    raw = {**body["cases"][0], "precision": "fp8", "emulated": False,
           "fp8Scaling": "blockwise", "expertKernel": "scaled_mm_loop"}
    raw["id"] = raw["id"].replace(body["cases"][0]["precision"], "fp8")
    body["cases"] = [raw]
    posted = client.post(REPORTS, json=body, headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    served = client.get(f"{REPORTS}/{posted.json()['id']}/cases").json()["items"][0]
    assert served["precision"] == "fp8" and served["fp8Scaling"] == "blockwise"
    assert served["percentOfPeak"] == approx(raw["usefulTFPerGPU"] / 1979 * 100)
    shape, rows = meta["shape"], max(raw["receiveRows"])
    d, f, el = shape["D"], raw["F"], shape["E"] // raw["ep"]
    weights = el * 3 * d * f * (1 + 4 / 128**2)
    forward = shape["T"] * d * 2 + rows * (2 * d + 4 * f) + weights + shape["T"] * shape["K"] * 4
    training = 3 if raw["mode"] == "training" else 1
    hbm = forward * training / (raw["layerMS"] * 1e-3) / 1e9 / 4800 * 100
    assert served["hbmUtilPercent"] == pytest.approx(hbm, rel=1e-9)
