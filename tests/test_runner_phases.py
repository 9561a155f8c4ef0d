"""The phase pass's report fields from ranks' outcomes (no ranks spawned): maxima over
ranks beside the means, the local/remote split of the bytes, bandwidth from the busiest
rank's remote bytes, and the gap between the phases' sum and the layer's time, each
against arithmetic written here."""

from __future__ import annotations

from typing import Any

import pytest

from runner.phase_report import phase_fields
from runner.phases import RowSplit, row_split
from runner.report import RankOutcome


def _outcome(rank: int, **phase: Any) -> RankOutcome:
    return RankOutcome(rank=rank, forward=[2.0], combined=[2.0], backward=None,
                       numerical_error=0.0, graph_accepted=None, graph_note=None,
                       rows_received=0, rows_sent_off_rank=0, allocated_peak_gib=None,
                       reserved_peak_gib=None, allocation_retries=0, nvlink_tx_gbps=None,
                       nvlink_rx_gbps=None, **phase)


# Windows already hold the maximum over ranks; each rank's own median differs.
WINDOWS = {"dispatch": [0.25, 0.5, 0.375], "experts": [1.0, 1.25, 1.5],
           "combine": [0.5, 0.5, 0.75]}


def _two_ranks(backward: bool = False) -> list[RankOutcome]:
    common: dict[str, Any] = {"phase_windows": WINDOWS, "phase_graphs": None}
    if backward:
        common["backward_phase_windows"] = {"combine": [0.5], "experts": [2.0],
                                            "dispatch": [0.25]}
    return [
        _outcome(0, **common, phase_rank_ms={"dispatch": 0.25, "experts": 1.0, "combine": 0.5},
                 backward_phase_rank_ms={"combine": 0.5, "experts": 2.0, "dispatch": 0.25}
                 if backward else None,
                 dispatch_local_bytes=100, dispatch_remote_bytes=3000,
                 combine_local_bytes=200, combine_remote_bytes=1000),
        _outcome(1, **common, phase_rank_ms={"dispatch": 0.125, "experts": 0.5, "combine": 0.25},
                 backward_phase_rank_ms={"combine": 0.25, "experts": 1.0, "dispatch": 0.125}
                 if backward else None,
                 dispatch_local_bytes=700, dispatch_remote_bytes=1000,
                 combine_local_bytes=0, combine_remote_bytes=5000),
    ]


def test_maxima_means_bytes_and_busiest_rank_bandwidth() -> None:
    fields = phase_fields(_two_ranks(), forward_ms=2.5, backward_ms=None)
    assert fields["phaseMS"] == {"dispatch": 0.375, "experts": 1.25, "combine": 0.5}
    assert fields["phaseMeanMS"] == {"dispatch": 0.1875, "experts": 0.75, "combine": 0.375}
    assert fields["dispatchLocalBytes"] == [100, 700]
    assert fields["dispatchRemoteBytes"] == [3000, 1000]
    assert fields["combineRemoteBytes"] == [1000, 5000]
    # Busiest rank's remote bytes, not the mean over ranks nor the local rows.
    assert fields["dispatchGBps"] == pytest.approx(3000 / 0.375e-3 / 1e9)
    assert fields["combineGBps"] == pytest.approx(5000 / 0.5e-3 / 1e9)
    assert fields["backwardPhaseMS"] is None and fields["phaseGraphNote"] is None


def test_the_gap_between_the_phases_sum_and_the_layer_is_computed() -> None:
    fields = phase_fields(_two_ranks(backward=True), forward_ms=2.5, backward_ms=3.5)
    assert fields["phaseSumMS"] == pytest.approx(0.375 + 1.25 + 0.5)
    assert fields["phaseGapMS"] == pytest.approx(2.5 - 2.125)
    assert fields["phaseGapPercent"] == pytest.approx(0.375 / 2.5 * 100)
    assert fields["backwardPhaseMS"] == {"combine": 0.5, "experts": 2.0, "dispatch": 0.25}
    assert fields["backwardPhaseMeanMS"] == {"combine": 0.375, "experts": 1.5,
                                             "dispatch": 0.1875}
    assert fields["backwardPhaseGapMS"] == pytest.approx(3.5 - 2.75)
    assert fields["phaseNote"] == (
        "forward phases (dispatch + experts + combine) sum to 2.125 ms against the layer's "
        "forward 2.5 ms: a gap of +0.375 ms (+15.0 % of the layer); backward phases sum "
        "to 2.75 ms against the layer's backward 3.5 ms: a gap of +0.75 ms (+21.4 %)")


def test_a_layer_faster_than_its_phases_has_a_negative_gap() -> None:
    fields = phase_fields(_two_ranks(), forward_ms=1.0, backward_ms=None)
    assert fields["phaseGapMS"] == pytest.approx(1.0 - 2.125)
    assert "a gap of -1.125 ms (-112.5 % of the layer)" in fields["phaseNote"]


def test_no_row_crossing_gives_no_bandwidth() -> None:
    ranks = _two_ranks()
    for o in ranks:
        o.dispatch_remote_bytes = 0
    assert phase_fields(ranks, forward_ms=2.5, backward_ms=None)["dispatchGBps"] is None


def test_row_split_own_rows_stay() -> None:
    assert row_split([3, 5, 2], 1) == RowSplit(local=5, remote=5)
    assert row_split([4], 0) == RowSplit(local=4, remote=0)  # one rank: nothing crosses


def test_the_busiest_rank_is_the_one_that_sends_most_when_it_sends_more() -> None:
    # Rank 0 receives 3000 bytes in the combine's place of rank 1's 5000, but sends 9000
    # back: its remote max(TX, RX) is 9000, the figure the combine's bandwidth counts.
    ranks = _two_ranks()
    for o, dispatch_tx, combine_tx in zip(ranks, (500, 2000), (9000, 100), strict=True):
        o.dispatch_sent_remote_bytes, o.combine_sent_remote_bytes = dispatch_tx, combine_tx
    fields = phase_fields(ranks, forward_ms=2.5, backward_ms=None)
    assert fields["combineSentRemoteBytes"] == [9000, 100]
    assert fields["combineBusiestRank"] == 0
    assert fields["combineGBps"] == pytest.approx(9000 / 0.5e-3 / 1e9)
    # The dispatch: rank 0's 3000 received beats rank 1's 2000 sent and 1000 received.
    assert fields["dispatchBusiestRank"] == 0
    assert fields["dispatchGBps"] == pytest.approx(3000 / 0.375e-3 / 1e9)


def test_in_layer_phases_beside_the_isolated_ones() -> None:
    ranks = _two_ranks()
    inside = {"dispatch": [0.25, 0.5, 0.25], "experts": [1.0, 1.0, 1.25],
              "combine": [0.125, 0.25, 0.25]}
    for o in ranks:
        o.in_layer_phase_windows, o.in_layer_note = inside, "wall clock (test)"
    fields = phase_fields(ranks, forward_ms=1.25, backward_ms=None)
    assert fields["inLayerPhaseMS"] == {"dispatch": 0.25, "experts": 1.0, "combine": 0.25}
    assert fields["inLayerPhaseSumMS"] == pytest.approx(1.5)
    assert fields["inLayerPhaseGapMS"] == pytest.approx(-0.25)  # the phases overlap
    assert fields["inLayerPhaseNote"].startswith("wall clock (test); the phases sum to 1.5 ms")
    assert fields["phaseMS"] == {"dispatch": 0.375, "experts": 1.25, "combine": 0.5}
    # A rank without marks (a compiled layer): no in-layer view, the reason kept.
    ranks[1].in_layer_phase_windows, ranks[1].in_layer_note = None, "compiled layer"
    fields = phase_fields(ranks, forward_ms=1.25, backward_ms=None)
    assert fields["inLayerPhaseMS"] is None
    assert fields["inLayerPhaseNote"] == "compiled layer"


def test_in_layer_backward_phases_against_the_layers_backward() -> None:
    ranks = _two_ranks(backward=True)
    forward = {"dispatch": [0.25], "experts": [1.0], "combine": [0.25]}
    backward = {"combine": [0.5, 0.75, 0.5], "experts": [2.0, 2.5, 2.25],
                "dispatch": [0.25, 0.25, 0.5]}
    for o in ranks:
        o.in_layer_phase_windows, o.in_layer_note = forward, "wall clock (test)"
        o.in_layer_backward_phase_windows = backward
    fields = phase_fields(ranks, forward_ms=2.0, backward_ms=3.5)
    assert fields["inLayerBackwardPhaseMS"] == {"combine": 0.5, "experts": 2.25,
                                                "dispatch": 0.25}
    assert fields["inLayerBackwardPhaseSumMS"] == pytest.approx(3.0)
    assert fields["inLayerBackwardPhaseGapMS"] == pytest.approx(0.5)
    assert fields["inLayerPhaseNote"].endswith(
        "the phases sum to 3 ms against the layer's backward 3.5 ms: a gap of +0.5 ms")
    # A backward phase left unmarked: no backward view, said in the note; the forward's
    # stays.
    for o in ranks:
        o.in_layer_backward_phase_windows = {"combine": [0.5], "experts": [2.0]}
    fields = phase_fields(ranks, forward_ms=2.0, backward_ms=3.5)
    assert fields["inLayerBackwardPhaseMS"] is None
    assert fields["inLayerPhaseMS"] == {"dispatch": 0.25, "experts": 1.0, "combine": 0.25}
    assert fields["inLayerPhaseNote"].endswith("no backward phases: not every one was "
                                               "marked inside the layer's backward")
