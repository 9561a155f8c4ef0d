"""A case's phase fields from its ranks' outcomes: the phases timed inside the layer's
own step (``inLayerPhaseMS``, runner.phase_clock) and each timed alone (``phaseMS``,
runner.phases), the bytes each rank sent and received in the dispatch and the combine,
and the busiest rank's bandwidth. Torch-free, like runner.report."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.report import RankOutcome

GBPS_NOTE = (
    "dispatchGBps / combineGBps: for each rank the larger of the bytes it sent to and "
    "received from the other ranks in that phase (its remote max(TX, RX)), the busiest "
    "rank's (dispatchBusiestRank / combineBusiestRank) over the phase's time alone "
    "(phaseMS); rows that stay on a rank are a copy, not traffic; null when no row "
    "crossed. Under imbalance the hot rank bounds both: it receives i x the mean rows in "
    "the dispatch and sends them back in the combine. To compare: nccl-tests' all-to-all "
    "busbw is a rank's bytes to all ranks x (n-1)/n over the time, the same remote bytes "
    "when the traffic is even; DeepEP's test_intranode prints each rank's received bytes "
    "(dispatch) and sent bytes (combine) including its own rows over its time: multiply "
    "ours by (local + remote) / remote of that rank, and by the bf16/fp8 row widths when "
    "the wire formats differ.")

PHASE_NOTE = (
    "Two views of the layer's phases. inLayerPhaseMS: timed inside the layer's own step "
    "(CUDA: timing events recorded in its captured graph, each replay read after it; CPU: "
    "a wall clock around each phase of the eager step), the maximum over ranks per "
    "window, the median of the windows; dispatch includes a quantized dispatch's packing; "
    "a staged layer's phases overlap on their streams, so inLayerPhaseGapMS (the layer's "
    "forward minus the phases' sum) is negative by the overlap; null for a compiled layer "
    "(mega on CUDA: torch.compile's graph has no marks). Training adds "
    "inLayerBackwardPhaseMS from the same steps' backward: each phase from its output's "
    "gradient arriving to its input's gradient leaving (marks in the autograd graph: CUDA "
    "events on the phase's stream, in the captured backward graph; CPU: a wall clock), "
    "whatever autograd runs in between included (a staged layer's other stages), and "
    "inLayerBackwardPhaseGapMS against the layer's backward. phaseMS: each phase timed on its "
    "own in a second pass the way the layer is timed: the same warm-up, L2 flush policy, "
    "windows and iterations, each window after a barrier, the maximum over ranks per "
    "window, the median of the windows; on CUDA each phase replays its own CUDA graph "
    "where every rank captured it (phaseGraphs; else eager, phaseGraphNote says why). "
    "phaseMeanMS: the mean over ranks of each rank's median, beside those maxima. Forward: "
    "quantize (quantized dispatch only: gather, pack to the wire format, nvfp4's amax "
    "all-reduce, the receiver's unpack), dispatch (the all-to-all of the wire rows), "
    "experts (expert order, GEMMs, back), combine (the all-to-all home, the weighted sum). "
    "Training adds backwardPhaseMS: combine (its transposed all-to-all), experts "
    "(gradients of rows and weights), dispatch (its transposed all-to-all). The pass runs "
    "the case's formats in one stage, so a staged or mega layer's overlap is not in it; "
    "each case's phaseNote states the gap between the phases' sum and the layer's time "
    "(phaseGapMS = layer - sum). Routing is decided on the host before the case and is not "
    "timed. dispatchMode / dispatchDedup: the exchange (static: splits known on the host; "
    "dynamic: counts exchanged on the device and copied to the host first, as Megatron's "
    "all-to-all dispatcher does, timed eagerly; dedup: one row per (token, destination "
    "rank) as DeepEP sends it, its combine one row back per (token, rank)). "
    "dispatchLocalBytes / RemoteBytes (and combine's): per rank, the bytes of the rows it "
    "received from itself and from the other ranks; dispatchSentRemoteBytes / "
    "combineSentRemoteBytes: the bytes it sent to the other ranks (the combine sends back "
    "what the dispatch delivered). " + GBPS_NOTE)

# The case fields phase_fields gives (all of them, null where they do not apply).
PHASE_FIELDS = (
    "phaseMS", "phaseMeanMS", "backwardPhaseMS", "backwardPhaseMeanMS", "dispatchGBps",
    "combineGBps", "dispatchLocalBytes", "dispatchRemoteBytes", "combineLocalBytes",
    "combineRemoteBytes", "dispatchSentRemoteBytes", "combineSentRemoteBytes",
    "dispatchBusiestRank", "combineBusiestRank", "phaseSumMS", "phaseGapMS",
    "phaseGapPercent", "backwardPhaseSumMS", "backwardPhaseGapMS", "backwardPhaseGapPercent",
    "phaseNote", "phaseGraphs", "phaseGraphNote", "inLayerPhaseMS", "inLayerPhaseSumMS",
    "inLayerPhaseGapMS", "inLayerPhaseNote", "inLayerBackwardPhaseMS",
    "inLayerBackwardPhaseSumMS", "inLayerBackwardPhaseGapMS",
)
IN_LAYER_PHASES = ("dispatch", "experts", "combine")


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def phase_fields(outcomes: list[RankOutcome], forward_ms: float,
                 backward_ms: float | None) -> dict[str, Any]:
    """Both views' fields: the in-layer phases (``in_layer_fields``); the phase pass's
    medians of the windows' maxima over ranks (``phaseMS``, as the layer's times) and the
    means over ranks of each rank's median (``phaseMeanMS``), training's
    ``backwardPhaseMS`` alike, the bytes both ways and the busiest rank's bandwidth
    (``traffic_fields``), the phases' sum against the layer's time. The phase pass's
    fields are null when it did not run on every rank (or a phase took no measurable
    time)."""
    first = outcomes[0]
    none: dict[str, Any] = dict.fromkeys(PHASE_FIELDS)
    fields: dict[str, Any] = {**none, **in_layer_fields(outcomes, forward_ms, backward_ms)}
    if first.phase_windows is None or any(
            o.phase_rank_ms is None or o.dispatch_remote_bytes is None for o in outcomes):
        return fields
    ms = {name: _median(values) for name, values in first.phase_windows.items()}
    if min(ms.values()) <= 0:
        return fields
    fields.update(phaseMS=ms, phaseMeanMS=_rank_means([o.phase_rank_ms for o in outcomes]))
    back = None
    if first.backward_phase_windows is not None:
        back = {name: _median(v) for name, v in first.backward_phase_windows.items()}
        if min(back.values()) > 0:
            fields["backwardPhaseMS"] = back
            fields["backwardPhaseMeanMS"] = _rank_means(
                [o.backward_phase_rank_ms for o in outcomes])
        else:
            back = None
    fields.update(traffic_fields(outcomes, ms))
    fields.update(phase_gap(ms, forward_ms, back, backward_ms))
    fields["phaseGraphs"] = first.phase_graphs
    notes = [o.phase_graph_note for o in outcomes if o.phase_graph_note]
    fields["phaseGraphNote"] = notes[0] if notes else None
    return fields


def traffic_fields(outcomes: list[RankOutcome], ms: dict[str, float]) -> dict[str, Any]:
    """Per rank the bytes received from itself and from the others, and sent to the
    others; per phase the busiest rank by its remote max(TX, RX) and its GB/s."""
    fields: dict[str, Any] = {}
    for phase in ("dispatch", "combine"):
        local = [int(getattr(o, f"{phase}_local_bytes") or 0) for o in outcomes]
        received = [int(getattr(o, f"{phase}_remote_bytes") or 0) for o in outcomes]
        sent = [getattr(o, f"{phase}_sent_remote_bytes") for o in outcomes]
        fields[f"{phase}LocalBytes"] = local
        fields[f"{phase}RemoteBytes"] = received
        known = all(s is not None for s in sent)
        fields[f"{phase}SentRemoteBytes"] = [int(s) for s in sent] if known else None
        both = [max(rx, int(tx) if known else 0) for rx, tx in zip(received, sent, strict=True)]
        busiest = max(range(len(both)), key=lambda i: both[i])
        fields[f"{phase}BusiestRank"] = outcomes[busiest].rank if both[busiest] else None
        fields[f"{phase}GBps"] = (both[busiest] / (ms[phase] * 1e-3) / 1e9 if both[busiest]
                                  else None)
    return fields


def in_layer_fields(outcomes: list[RankOutcome], forward_ms: float,
                    backward_ms: float | None = None) -> dict[str, Any]:
    """``inLayerPhaseMS`` (each phase's median of the windows' maxima over ranks), their
    sum against the layer's forward and the note saying how they were timed; nothing
    where a rank has no marks for one of the three phases. Training: the backward's
    (``inLayerBackwardPhaseMS``) alike against the layer's backward, where every rank
    marked its three phases."""
    first = outcomes[0]
    windows = first.in_layer_phase_windows
    if windows is None or any(o.in_layer_phase_windows is None for o in outcomes):
        reason = next((o.in_layer_note for o in outcomes
                       if o.in_layer_phase_windows is None and o.in_layer_note), None)
        return {"inLayerPhaseNote": reason} if reason else {}
    ms = _in_layer_ms(windows)
    if ms is None:
        return {"inLayerPhaseNote": f"not every phase was marked inside the layer "
                                    f"({', '.join(sorted(windows)) or 'none'})"}
    total = sum(ms.values())
    gap = forward_ms - total
    fields: dict[str, Any] = {"inLayerPhaseMS": ms, "inLayerPhaseSumMS": total,
                              "inLayerPhaseGapMS": gap}
    words = [f"{first.in_layer_note}; the phases sum to {total:.4g} ms against the "
             f"layer's forward {forward_ms:.4g} ms: a gap of {gap:+.4g} ms (negative: "
             f"the phases overlap)"]
    back = first.in_layer_backward_phase_windows
    back_ms = _in_layer_ms(back) if back is not None and backward_ms else None
    if back_ms is not None and backward_ms:
        back_total = sum(back_ms.values())
        fields.update(inLayerBackwardPhaseMS=back_ms, inLayerBackwardPhaseSumMS=back_total,
                      inLayerBackwardPhaseGapMS=backward_ms - back_total)
        words.append(f"backward (each phase from its gradient arriving to its input's "
                     f"gradient leaving): the phases sum to {back_total:.4g} ms against "
                     f"the layer's backward {backward_ms:.4g} ms: a gap of "
                     f"{backward_ms - back_total:+.4g} ms")
    elif backward_ms:
        words.append("no backward phases: not every one was marked inside the layer's "
                     "backward")
    fields["inLayerPhaseNote"] = "; ".join(words)
    return fields


def _in_layer_ms(windows: dict[str, list[float]]) -> dict[str, float] | None:
    """The three phases' medians, or None where one is missing or took no time."""
    ms = {p: _median(windows[p]) for p in IN_LAYER_PHASES if p in windows}
    if len(ms) < len(IN_LAYER_PHASES) or min(ms.values()) <= 0:
        return None
    return ms


def _rank_means(per_rank: list[dict[str, float] | None]) -> dict[str, float]:
    known = [p for p in per_rank if p is not None]
    return {name: statistics.fmean(p[name] for p in known) for name in known[0]}


def phase_gap(forward: dict[str, float], forward_ms: float, backward: dict[str, float] | None,
              backward_ms: float | None) -> dict[str, Any]:
    """The phases' sum against the layer's own time of the same pass: ``phaseGapMS`` is
    the layer's time minus the sum (positive: work between the phases that none of them
    times, launch gaps; negative: the layer overlaps its phases, as the staged pipeline
    does, or a phase alone pays more than inside the layer), in ms and % of the layer's
    time, said in words in the case's ``phaseNote``."""
    total = sum(forward.values())
    gap = forward_ms - total
    fields: dict[str, Any] = {"phaseSumMS": total, "phaseGapMS": gap,
                              "phaseGapPercent": gap / forward_ms * 100}
    words = [f"forward phases ({' + '.join(forward)}) sum to {total:.4g} ms against the "
             f"layer's forward {forward_ms:.4g} ms: a gap of {gap:+.4g} ms "
             f"({gap / forward_ms * 100:+.1f} % of the layer)"]
    if backward is not None and backward_ms:
        back_total = sum(backward.values())
        back_gap = backward_ms - back_total
        fields.update(backwardPhaseSumMS=back_total, backwardPhaseGapMS=back_gap,
                      backwardPhaseGapPercent=back_gap / backward_ms * 100)
        words.append(f"backward phases sum to {back_total:.4g} ms against the layer's "
                     f"backward {backward_ms:.4g} ms: a gap of {back_gap:+.4g} ms "
                     f"({back_gap / backward_ms * 100:+.1f} %)")
    fields["phaseNote"] = "; ".join(words)
    return fields
