"""Series queries and the regressions service on SQLite and Postgres: the verdicts found
through the database are the ones the synthetic series was built to produce, and a
series' points come back in history order with the values as posted."""

from __future__ import annotations

import copy
from typing import Any

import plotly.graph_objects as go
import pytest
from history_helpers import ingest, synthetic_series
from sqlalchemy.orm import Session

from app import figures
from app.core.errors import NotFound
from app.services.history import case_history, report_regressions
from ingest.regressions import Settings

Body = dict[str, Any]


def test_regressions_of_the_newest_report(session: Session, reference: Body) -> None:
    ids = [c["id"] for c in reference["cases"]]
    slowed, sped = [ids[0], ids[20], ids[45]], ids[36]
    reports = synthetic_series(reference, 11, seed=3,
                               newest_factor={**dict.fromkeys(slowed, 1.15), sped: 0.88})
    report_ids = [ingest(session, r) for r in reports]

    verdicts = report_regressions(session, report_ids[-1]).items
    assert [v.case_id for v in verdicts] == ids
    flagged = {v.case_id: v.verdict.status for v in verdicts if v.verdict.flagged}
    assert flagged == {**dict.fromkeys(slowed, "regression"), sped: "improvement"}
    assert {v.verdict.baseline_points for v in verdicts} == {10}
    # The baseline is the median of the ten earlier layer times, as posted.
    earlier = sorted(r["cases"][0]["layerMS"] for r in reports[:-1])
    assert verdicts[0].verdict.baseline == pytest.approx((earlier[4] + earlier[5]) / 2)

    # A rolling window: only the last 4 earlier reports count.
    short = report_regressions(session, report_ids[-1], Settings(window=4)).items
    assert {v.verdict.baseline_points for v in short} == {4}
    last4 = sorted(r["cases"][0]["layerMS"] for r in reports[-5:-1])
    assert short[0].verdict.baseline == pytest.approx((last4[1] + last4[2]) / 2)

    # History is what came before: the third report has two earlier points, the fourth three.
    third, fourth = (report_regressions(session, i).items for i in report_ids[2:4])
    assert {v.verdict.status for v in third} == {"insufficient_history"}
    assert {v.verdict.baseline_points for v in fourth} == {3}


def _variant(reference: Body, date: str, layer_ms: float, **meta: Any) -> Body:
    """The reference's first two cases; the first measured at ``layer_ms``."""
    body = {"meta": {**copy.deepcopy(reference["meta"]), "date": date, **meta},
            "cases": copy.deepcopy(reference["cases"][:2])}
    case = body["cases"][0]
    factor = layer_ms / case["layerMS"]
    case["layerMS"] = layer_ms
    case["windows"]["combined"] = [w * factor for w in case["windows"]["combined"]]
    return body


def test_history_order_and_content(session: Session, reference: Body) -> None:
    gpu = reference["meta"]["gpu"]
    case_id = reference["cases"][0]["id"]
    # Posted out of date order; two on the same date, told apart by ingestion time.
    late = ingest(session, _variant(reference, "2026-10-03", 1.3))
    first = ingest(session, _variant(reference, "2026-10-01", 1.1))
    same_day_a = ingest(session, _variant(reference, "2026-10-02", 1.2))
    same_day_b = ingest(session, _variant(reference, "2026-10-02", 1.25))
    # Another GPU and another shape are other series.
    ingest(session, _variant(reference, "2026-10-02", 9.0, gpu="NVIDIA H200"))
    other_shape = {**reference["meta"]["shape"], "T": 4096}
    ingest(session, _variant(reference, "2026-09-30", 7.0, shape=other_shape))

    history = case_history(session, case_id, gpu)
    assert history.fields == {"gpu": gpu, "T": 2048, "D": 7168, "E": 384, "K": 6}
    got = [(p.point.report_id, p.point.date, p.point.layer_ms) for p in history.points]
    assert got == [(first, "2026-10-01", 1.1), (same_day_a, "2026-10-02", 1.2),
                   (same_day_b, "2026-10-02", 1.25), (late, "2026-10-03", 1.3)]
    windows = [w * 1.3 / 1.4241407990455628 for w in reference["cases"][0]["windows"]["combined"]]
    last = history.points[-1].point
    assert last.window_min_ms == pytest.approx(min(windows))
    assert last.window_max_ms == pytest.approx(max(windows))
    assert last.useful_tf_per_gpu == reference["cases"][0]["usefulTFPerGPU"]
    # bf16 peak of the reference meta: 2500 TFLOP/s.
    assert last.percent_of_peak == pytest.approx(last.useful_tf_per_gpu / 2500 * 100)
    # Three earlier points before the last: 1.1, 1.2, 1.25, median 1.2; 1.3 is 8.3 % slower,
    # past the threshold, and the history's MAD (0.05) puts the noise at 21.6 %.
    statuses = [p.verdict.status for p in history.points]
    assert statuses == ["insufficient_history"] * 3 + ["unchanged"]
    assert history.points[-1].verdict.change_percent == pytest.approx((1.3 - 1.2) / 1.2 * 100)
    assert len(history.other_series) == 1
    # The report's own earlier points, as the database picks them: the same date is told
    # apart by ingestion time, and a report posted earlier with a later date is not earlier.
    earlier = {rid: report_regressions(session, rid).items[0].verdict.baseline_points
               for rid in (first, same_day_a, same_day_b, late)}
    assert earlier == {first: 0, same_day_a: 1, same_day_b: 2, late: 3}

    shape_history = case_history(session, case_id, gpu, history.other_series[0])
    assert [p.point.layer_ms for p in shape_history.points] == [7.0]
    assert shape_history.fields["T"] == 4096

    with pytest.raises(NotFound):
        case_history(session, "no-such-case", gpu)
    with pytest.raises(NotFound):
        case_history(session, case_id, gpu, "0" * 16)


def test_history_chart_marks_the_flagged_point_and_its_quiet_zone() -> None:
    def point(report_id: int, layer: float, status: str, baseline: float | None = None,
              change: float | None = None, noise: float | None = None) -> dict[str, Any]:
        return {"reportId": report_id, "date": f"2026-10-0{report_id}", "layerMS": layer,
                "windowMinMS": layer * 0.99, "windowMaxMS": layer * 1.01,
                "windowSpreadPercent": 2.0, "usefulTFPerGPU": 100 / layer,
                "percentOfPeak": None, "status": status, "baseline": baseline,
                "changePercent": change, "baselinePoints": report_id - 1,
                "noisePercent": noise}

    points = [point(1, 1.0, "insufficient_history"), point(2, 1.0, "insufficient_history"),
              point(3, 1.0, "insufficient_history"),
              point(4, 1.01, "unchanged", 1.0, 1.0, 2.0),
              point(5, 1.2, "regression", 1.0, 20.0, 8.0)]
    specs = figures.history_specs(points, threshold_percent=5.0)
    for spec in specs.values():
        go.Figure(figures.to_figure(spec).to_dict())  # a validating round trip accepts it
    layer = figures.to_figure(specs["layer-time"])
    by_name = {trace.name: trace for trace in layer.data}
    assert list(by_name["regression"].x) == ["2026-10-05"]
    assert list(by_name["regression"].text) == ["+20.0 %"]
    assert list(by_name["improvement"].x) == []
    # The band a point could land in unflagged: baseline +- max(5 % threshold, its noise).
    upper, lower = layer.data[0], layer.data[1]
    assert list(upper.y) == [None, None, None, pytest.approx(1.05), pytest.approx(1.08)]
    assert list(lower.y) == [None, None, None, pytest.approx(0.95), pytest.approx(0.92)]
    # The threshold the points were judged with, not a 5 % of the chart's own: at 10 % the
    # fourth point's band is +- 10 % and the fifth's max(10, 8) = 10 %.
    wider = figures.to_figure(figures.history_specs(points, threshold_percent=10.0)["layer-time"])
    assert list(wider.data[0].y) == [None, None, None, pytest.approx(1.10), pytest.approx(1.10)]
    # The y axis leaves room above the highest window for the flag's label.
    assert layer.layout.yaxis.range == (0, pytest.approx(1.2 * 1.01 * 1.18))


def test_a_case_missing_from_recent_reports_keeps_its_older_points(
    session: Session, reference: Body
) -> None:
    reports = synthetic_series(reference, 8, seed=5)
    sparse = reference["cases"][1]["id"]
    for report in reports[3:7]:  # a smaller matrix ran four times without it
        report["cases"] = [c for c in report["cases"] if c["id"] != sparse]
    report_ids = [ingest(session, r) for r in reports]

    verdicts = {v.case_id: v.verdict
                for v in report_regressions(session, report_ids[-1], Settings(window=4)).items}
    assert verdicts[reference["cases"][0]["id"]].baseline_points == 4
    assert verdicts[sparse].baseline_points == 3
    assert verdicts[sparse].baseline == sorted(r["cases"][1]["layerMS"] for r in reports[:3])[1]
