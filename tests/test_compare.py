"""Compare: one judge with history, attribution to a phase or to the GPU, the provenance diff,
grouping, on synthetic series built from the reference (tests/history_helpers.py)."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest
from compare_helpers import combine_slowed, series, slow_down
from history_helpers import ingest, synthetic_series
from sqlalchemy.orm import Session
from views import view, views

from app.figures import compare_charts, report_charts
from app.services.comparison import (
    compare_reports,
    default_pair,
    pair_verdict,
    ratio_points,
)
from app.services.history import case_history
from ingest.attribution import Measured, attribute
from ingest.grouping import Flagged, group_flagged
from ingest.regressions import Settings

Body = dict[str, Any]
def test_a_combine_only_slowdown_is_attributed_to_combine_and_grouped(
    session: Session, reference: Body
) -> None:
    bodies, slowed = combine_slowed(reference)
    newest = bodies[-1]
    assert len(slowed) == 9
    ids = [ingest(session, b) for b in bodies]

    result = compare_reports(session, ids[-2], ids[-1])
    assert result.same_series
    by_id = {r.case_id: r for r in result.rows}
    previous = {c["id"]: c for c in bodies[-2]["cases"]}
    for case_id in slowed:
        row = by_id[case_id]
        assert row.verdict.status == "regression" and row.basis == "history"
        assert row.attribution.top_phase == "combine"
        before = previous[case_id]["phaseMS"]["combine"]
        after = newest_case(newest, case_id)["phaseMS"]["combine"]
        percent = (after - before) / before * 100
        assert row.attribution.phases[0].percent == pytest.approx(percent)
        assert row.attribution.text().startswith(f"combine {round(percent):+d} %")
        assert row.attribution.gpu_state == []  # the GPU ran as before
    # Nothing else moved past its noise: the nine are the only flagged cases.
    assert {r.case_id for r in result.rows if r.verdict.flagged} == set(slowed)

    # One group names the nine, with the range of their verdicts' changes.
    assert len(result.groups) == 1
    group = result.groups[0]
    changes = [by_id[c].verdict.change_percent or 0.0 for c in slowed]
    assert sorted(group.case_ids) == sorted(slowed)
    assert group.text() == (f"9 inference nvfp4 mega cases: {min(changes):+.1f} % to "
                            f"{max(changes):+.1f} % (regression)")
    # Regressions first, the largest first.
    assert [r.case_id for r in result.rows[:9]] == sorted(
        slowed, key=lambda c: -abs(by_id[c].verdict.change_percent or 0.0))

    # The geometric mean of the nvfp4 mega layer times, computed here from the bodies.
    ratios = [newest_case(newest, c)["layerMS"] / previous[c]["layerMS"] for c in slowed]
    expected = (math.exp(statistics.fmean(math.log(r) for r in ratios)) - 1) * 100
    geo = {(g.mode, g.precision, g.pipeline): g for g in result.geomeans}
    assert geo["inference", "nvfp4", "mega"].cases == 9
    assert geo["inference", "nvfp4", "mega"].change_percent == pytest.approx(expected)


def newest_case(report: Body, case_id: str) -> Body:
    return next(c for c in report["cases"] if c["id"] == case_id)


def test_a_clock_drop_is_attributed_to_gpu_state(session: Session, reference: Body) -> None:
    bodies = series(reference)
    case = bodies[-1]["cases"][4]
    slow_down(case, 0.3 * case["layerMS"])
    for phase in case["phaseMS"]:
        case["phaseMS"][phase] *= 1.3  # every phase slower: the GPU, not one phase
    case["gpuState"].update(smClockMinMHz=1410.0,
                            throttleReasonNames=["HwPowerBrakeSlowdown"])
    ids = [ingest(session, b) for b in bodies]

    row = next(r for r in compare_reports(session, ids[-2], ids[-1]).rows
               if r.case_id == case["id"])
    assert row.verdict.status == "regression"
    drop = (1410.0 - 1965.0) / 1965.0 * 100
    assert row.attribution.gpu_state == [
        f"SM clock min 1965 -> 1410 MHz ({round(drop):+d} %)", "throttled: HwPowerBrakeSlowdown"]
    assert "SM clock min 1965 -> 1410 MHz (-28 %)" in row.attribution.text()


def test_a_driver_change_is_listed_and_other_meta_too(session: Session, reference: Body) -> None:
    bodies = series(reference, 2)
    head = bodies[-1]
    head["meta"]["host"]["driver"] = "580.159"
    head["meta"]["peakNote"] = "Measured peaks."
    ids = [ingest(session, b) for b in bodies]

    result = compare_reports(session, ids[0], ids[1])
    found = {(p.field, p.base, p.head) for p in result.provenance}
    assert ("host.driver", "580.95", "580.159") in found
    assert ("peakNote", reference["meta"]["peakNote"], "Measured peaks.") in found
    # Host facts first: what a person suspects first.
    assert result.provenance[0].field == "host.driver"
    # Only what differs: the CUDA version is the same on both sides.
    assert not any(p.field == "host.cuda" for p in result.provenance)
    # Two reports: no history of 3 points yet, so each case is judged against the base.
    assert {r.basis for r in result.rows} == {"pair"}


def test_compare_and_history_give_the_same_verdict(session: Session, reference: Body) -> None:
    ids_all = [c["id"] for c in reference["cases"]]
    slowed, sped = [ids_all[3], ids_all[30]], ids_all[50]
    bodies = synthetic_series(reference, 7, seed=11,
                              newest_factor={**dict.fromkeys(slowed, 1.2), sped: 0.85})
    ids = [ingest(session, b) for b in bodies]
    gpu = reference["meta"]["gpu"]

    result = compare_reports(session, ids[-2], ids[-1])
    assert {r.basis for r in result.rows} == {"history"}
    for row in result.rows:
        point = case_history(session, row.case_id, gpu).points[-1]
        assert point.point.report_id == ids[-1]
        assert row.verdict == point.verdict
    statuses = {r.case_id: r.verdict.status for r in result.rows if r.verdict.flagged}
    assert statuses == {**dict.fromkeys(slowed, "regression"), sped: "improvement"}

    # The newest report and its series' previous one are compare's default pair.
    assert default_pair(session) == (ids[-2], ids[-1])
    # Head before base: not one series in order, so the pair alone is judged.
    backwards = compare_reports(session, ids[-1], ids[-2])
    assert not backwards.same_series and {r.basis for r in backwards.rows} == {"pair"}


def test_a_pair_verdict_takes_the_larger_window_spread_as_noise() -> None:
    base = {"layerMS": 1.0, "windowSpreadPercent": 2.0}
    head = {"layerMS": 1.08, "windowSpreadPercent": 9.0}
    verdict = pair_verdict(view(base), view(head), Settings())
    assert verdict.status == "unchanged"  # +8 % is within the head's own 9 % spread
    assert verdict.change_percent == pytest.approx(8.0)
    assert verdict.noise_percent == pytest.approx(9.0)
    loud = pair_verdict(view(base), view({**head, "layerMS": 1.12}), Settings())
    assert loud.status == "regression" and loud.baseline_points == 1


def test_attribution_without_phases_names_nothing() -> None:
    assert attribute(Measured(None, None), Measured(None, None)).text() == ""
    both = attribute(Measured({"dispatch": 1.0, "experts": 2.0, "combine": 1.0}, None),
                     Measured({"dispatch": 1.5, "experts": 2.1, "combine": 1.0}, None))
    assert both.text() == "dispatch +50 %, experts +5 %, combine +0 %"
    hair = attribute(Measured({"dispatch": 1.0, "experts": 2.0, "combine": 1.0}, None),
                     Measured({"dispatch": 0.999, "experts": 2.0, "combine": 1.0}, None))
    assert "dispatch +0 %" in hair.text()


def test_grouping_names_what_each_group_shares() -> None:
    def case(i: int, precision: str, ep: int, F: int = 3072) -> dict[str, Any]:  # noqa: N803
        return {"id": f"c{i}", "mode": "inference", "precision": precision,
                "pipeline": "mega", "category": "single_layer", "ep": ep, "F": F,
                "imbalance": 1.0}

    cases = [case(0, "nvfp4", 64), case(1, "nvfp4", 64, 1536), case(2, "nvfp4", 8),
             case(3, "mxfp8", 64), case(4, "mxfp8", 64)]
    flagged = [Flagged(cases[0], "regression", 12.0), Flagged(cases[1], "regression", 16.5),
               Flagged(cases[3], "regression", 30.0), Flagged(cases[4], "improvement", -9.0)]
    groups = group_flagged(flagged, cases)
    assert [g.text() for g in groups] == [
        # Two of the three nvfp4 cases: both EP64, which names the group (and both of the
        # report's nvfp4 EP64 cases moved, so no "of").
        "2 inference nvfp4 mega single_layer EP64 i1 cases: +12.0 % to +16.5 % (regression)",
        "1 of 2 inference mxfp8 mega single_layer EP64 F3072 i1 cases: +30.0 % (regression)",
        "1 of 2 inference mxfp8 mega single_layer EP64 F3072 i1 cases: -9.0 % (improvement)",
    ]


def test_the_ratio_chart_labels_configurations_as_the_report_page_does(
    session: Session, reference: Body
) -> None:
    bodies = synthetic_series(reference, 2, seed=21)
    ids = [ingest(session, b) for b in bodies]
    result = compare_reports(session, ids[0], ids[1])
    ratio = compare_charts.ratio_spec(ratio_points(result), 5.0, ids[0], ids[1])
    report = report_charts.layer_time_spec(views(bodies[1]["cases"]), bodies[1]["meta"])
    # The same ticks ("EP8 F3072 i1", stacked), the same mode · category headings.
    for key in ("tickvals", "ticktext"):
        assert ratio["layout"]["xaxis"][key] == report["layout"]["xaxis"][key]
    assert "EP8<br>F3072<br>i1" in ratio["layout"]["xaxis"]["ticktext"]

    def headings(spec: dict[str, Any]) -> list[tuple[str, float]]:
        return [(a["text"], a["x"]) for a in spec["layout"]["annotations"]
                if a.get("yanchor") == "bottom" and a.get("xref") == "x"]

    assert headings(ratio) == headings(report) and headings(ratio)
    # Each case's bar at its place on the report page's axis.
    placed = {case_id: x for t in report["data"] if t["type"] == "bar"
              for case_id, x in zip((c[0] for c in t["customdata"]), t["x"], strict=True)}
    bars = {case_id: x for t in ratio["data"]
            for case_id, x in zip((c[0] for c in t["customdata"]), t["x"], strict=True)}
    assert bars == placed and len(bars) == 63
    # The noise band's label sits on its top edge: a log axis places annotations by log10.
    [band] = [s for s in ratio["layout"]["shapes"] if s["type"] == "rect"]
    [note] = [a for a in ratio["layout"]["annotations"] if "noise band" in a["text"]]
    assert note["y"] == pytest.approx(math.log10(band["y1"]))
