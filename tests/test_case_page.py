"""The case page: its verdict against history (change, noise, why, the history link), its
numbers in their units, and no training-only chart for an inference case."""

from __future__ import annotations

import statistics
from typing import Any

from compare_helpers import combine_slowed
from history_helpers import ingest
from page_helpers import find, pages, texts  # noqa: F401 - pages is a fixture
from sqlalchemy.orm import Session

from app.services.case_text import formatted, size_text
from app.services.history import history_path

Body = dict[str, Any]


def test_case_page_names_its_verdict_and_why(session: Session, reference: Body,
                                             pages: dict[str, Any]) -> None:  # noqa: F811
    bodies, slowed = combine_slowed(reference)
    ids = [ingest(session, b) for b in bodies]
    case_id = slowed[0]
    earlier = [next(c for c in b["cases"] if c["id"] == case_id) for b in bodies[:-1]]
    newest = next(c for c in bodies[-1]["cases"] if c["id"] == case_id)
    baseline = statistics.median(c["layerMS"] for c in earlier)
    change = (newest["layerMS"] - baseline) / baseline * 100

    page = pages["case"].layout(str(ids[-1]), case_id)
    verdict = texts(find(page, "case-verdict-text"))[0]
    assert verdict.startswith(f"regression: {change:+.1f} % vs median {baseline:.4g} ms of 5 "
                              "earlier, noise ")
    phases = statistics.median(c["phaseMS"]["combine"] for c in earlier)
    combine = (newest["phaseMS"]["combine"] - phases) / phases * 100
    assert texts(find(page, "case-verdict-why")) == [
        f"why: combine {round(combine):+d} %, experts +0 %, dispatch +0 %"]
    series = bodies[-1]["meta"]  # the history link: the case's series on its GPU
    href = find(page, "case-history-link").href
    assert href.startswith(history_path(case_id, series["gpu"], "")[:-1])

    # An unflagged case of the first report: too little history, and said so.
    first = pages["case"].layout(str(ids[0]), case_id)
    assert texts(find(first, "case-verdict-text")) == ["fewer than 3 earlier points (0)"]
    assert find(first, "case-verdict-why") is None


def test_case_numbers_in_their_units_and_no_training_chart_for_inference(
    session: Session, reference: Body, pages: dict[str, Any]  # noqa: F811
) -> None:
    rid = ingest(session, reference)
    inference = next(c for c in reference["cases"] if c["mode"] == "inference")
    training = next(c for c in reference["cases"] if c["mode"] == "training")
    page = pages["case"].layout(str(rid), inference["id"])
    cells = {row.children[0].children: row.children[1]
             for row in find(page, "case-fields").children[1].children}
    assert cells["layerMS"].children == f"{inference['layerMS']:.4g} ms"
    assert cells["arenaBytes"].children == f"{inference['arenaBytes'] / 2**30:,.2f} GiB"
    assert cells["allocatedPeakGiB"].children == f"{inference['allocatedPeakGiB']:,.2f} GiB"
    assert cells["nvlinkTXGBps"].children == f"{inference['nvlinkTXGBps']:,.1f} GB/s"
    peak = inference["usefulTFPerGPU"] / reference["meta"]["theoreticalTFPerGPU"]["bf16"] * 100
    assert cells["percentOfPeak"].children == f"{peak:.1f} %"
    assert cells["receiveRows"].children == "12,288 rows on each of 8 ranks"
    assert cells["savedBytes"].children == "none"
    # The exact value, as posted, is the cell's tooltip.
    assert cells["layerMS"].title == f"{inference['layerMS']:,.6g}"
    assert cells["arenaBytes"].title == str(inference["arenaBytes"])

    assert find(page, "case-graph-saved-bytes") is None
    assert find(page, "case-graph-windows") is not None
    trained = pages["case"].layout(str(rid), training["id"])
    assert find(trained, "case-graph-saved-bytes") is not None


def test_sizes_and_phases_read_in_units() -> None:
    assert size_text(1536) == "1.50 KiB" and size_text(100) == "100 B"
    assert size_text(3 * 2**30) == "3.00 GiB"
    assert formatted("phaseMS", {"dispatch": 0.25, "experts": 1.5, "combine": 0.125}) == (
        "dispatch 0.25 ms, experts 1.5 ms, combine 0.125 ms")
    assert formatted("savedBytes", [2**30, 2**31]) == (
        "1.00 GiB to 2.00 GiB over 2 ranks (median 2.00 GiB)")
    assert formatted("backwardMS", None) == "n/a"
    assert formatted("setupS", 1234.5) == "1,234.50 s"
    assert formatted("compileS", 0.0) == "0.00 s" and formatted("compiledGraphs", 3) == "3"
    assert formatted("ooms", 2) == "2"


def test_case_page_says_what_bounds_it_and_why_no_phase_chart(
    session: Session, reference: Body, pages: dict[str, Any]  # noqa: F811
) -> None:
    rid = ingest(session, reference)
    case = next(c for c in reference["cases"]
                if c["id"] == "training-ep32-bf16-standard-single_layer-F3072-i4")
    page = pages["case"].layout(str(rid), case["id"])
    rows = case["receiveRows"]
    hot = max(rows) / (sum(rows) / len(rows))
    compute = case["usefulTFPerGPU"] / 2500 * 100 * hot  # the busiest rank, bf16 peak 2500
    assert find(page, "case-bound").children == (
        f"compute-bound on the busiest rank ({compute:.0f} %, {hot:.1f}× the mean rows); "
        f"the other ranks wait {(1 - 1 / hot) * 100:.0f} % of the time")
    payload = case["forwardFlopsPerLogicalPayloadByteRank0"] * 900 / 1000  # NVLink roof
    assert find(page, "case-roofs").children.endswith(
        f"compute {compute:.0f} %, HBM {_hbm_percent(case):.0f} %, "
        f"NVLink {case['usefulTFPerGPU'] * hot / payload * 100:.0f} %")
    # The reference times no phases: a line says so instead of a one-bar chart.
    assert find(page, "case-graph-phases") is None
    assert "no phaseMS" in find(page, "case-no-phases").children


def _hbm_percent(case: Body) -> float:
    """DESIGN.md's hbmUtilPercent by hand (the reference: T 2048, D 7168, E 384, K 6, bf16)."""
    t, d, e, k = 2048, 7168, 384, 6
    rows, f = max(case["receiveRows"]), case["F"]
    forward = t * d * 2 + rows * (2 * d + 4 * f) + (e // case["ep"]) * 3 * d * f * 2 + t * k * 4
    return forward * 3 / (case["layerMS"] / 1000) / 1e9 / 8000 * 100
