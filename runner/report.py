"""The report the runner posts: meta and cases as wire dicts, checked with ``ingest``'s
own validation so the runner cannot produce what the service rejects. Torch-free."""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass, field
from typing import Any

from ingest.derived import clock_event_names
from ingest.precisions import BLOCK_ELEMENTS
from ingest.schema import wire_dict
from ingest.validate import validate_case, validate_report
from runner.ceilings import ceiling_note
from runner.matrix import Matrix, Timing
from runner.model import logical_payload_rank0, model_case, runner_scratch_bytes
from runner.spec import CaseSpec, Shape

PHASE_NOTE = (
    "phaseMS: the layer's phases, each timed on its own in a second pass the way the layer "
    "is timed: the same warm-up, L2 flush policy, windows and iterations, each window after "
    "a barrier, the maximum over ranks per window, the median of the windows; on CUDA each "
    "phase replays its own CUDA graph where every rank captured it (phaseGraphs; else "
    "eager, phaseGraphNote says why). phaseMeanMS: the mean over ranks of each rank's "
    "median, beside those maxima. Forward: quantize (quantized dispatch only: gather, pack "
    "to the wire format, nvfp4's amax all-reduce, the receiver's unpack), dispatch (the "
    "all-to-all of the wire rows), experts (expert order, GEMMs, back), combine (the "
    "all-to-all home, the weighted sum). Training adds backwardPhaseMS: combine (its "
    "transposed all-to-all), experts (gradients of rows and weights), dispatch (its "
    "transposed all-to-all). The pass runs the case's formats in one stage, so a staged "
    "or mega layer's overlap is not in it; each case's phaseNote states the gap between "
    "the phases' sum and the layer's time (phaseGapMS = layer - sum). Routing is decided "
    "on the host before the case and is not timed. dispatchLocalBytes / RemoteBytes (and "
    "combine's): per rank, the bytes of the rows it received from itself and from the "
    "other ranks; dispatchGBps / combineGBps: the busiest rank's remote bytes over the "
    "phase's time (rows that stay on a rank are a copy, not traffic; null when no row "
    "crossed).")
ERROR_BOUND_NOTE = ("numericalAccepted: relative Frobenius error against a float32 "
                    "reference of the same routed layer (training: worst of output and all "
                    "gradients), bounds bf16 2e-2, mxfp8 1.2e-1, nvfp4 3.5e-1")


@dataclass
class RankOutcome:
    """One rank's view of a case, plain data (this module stays torch-free). A phase that
    ran out of memory on any rank leaves its fields (and those of every later phase) None."""

    rank: int
    forward: list[float] | None
    combined: list[float] | None
    backward: list[float] | None
    numerical_error: float | None
    graph_accepted: bool | None
    graph_note: str | None
    rows_received: int
    rows_sent_off_rank: int
    allocated_peak_gib: float | None
    reserved_peak_gib: float | None
    allocation_retries: int
    nvlink_tx_gbps: float | None
    nvlink_rx_gbps: float | None
    ooms: int = 0
    oom_note: str | None = None  # why the case ended early on every rank: an OOM, a failure
    failure: str | None = None  # this rank's failure (phase, exception type, message)
    emulated: bool = False  # a quantized case whose GEMMs did not all run natively
    # runner.phases: per phase, per window, the maximum over ranks; this rank's medians
    phase_windows: dict[str, list[float]] | None = None
    phase_rank_ms: dict[str, float] | None = None
    backward_phase_windows: dict[str, list[float]] | None = None  # training
    backward_phase_rank_ms: dict[str, float] | None = None
    # Bytes this rank received in the dispatch (the combine: got back) from itself and
    # from the other ranks
    dispatch_local_bytes: int | None = None
    dispatch_remote_bytes: int | None = None
    combine_local_bytes: int | None = None
    combine_remote_bytes: int | None = None
    phase_graphs: bool | None = None  # every phase replayed as its own CUDA graph
    phase_graph_note: str | None = None  # why a phase ran eagerly
    gpu_state: dict[str, Any] | None = None  # runner.gpustate.summary
    gpu_state_reason: str | None = None  # why gpu_state is None
    notes: list[str] = field(default_factory=list)
    expert_kernel: str | None = None  # runner.expert_kernels.EXPERT_KERNELS over the timed passes
    fp8_scaling: str | None = None  # the fp8 recipe(s) of those passes: blockwise, rowwise
    # every timed iteration's ms per kind (combined, forward, backward), max over ranks
    iterations: dict[str, list[float]] | None = None
    setup_s: float | None = None  # case start to its first timed window, this rank
    wall_s: float | None = None  # the whole case on this rank
    # torch.compile during the case (runner.compiles): seconds and graphs; None where the
    # layer is not compiled
    compile_s: float | None = None
    compiled_graphs: int | None = None


class Unmeasured(ValueError):
    """A case whose required times could not be measured (the ranks ran out of memory
    before): it cannot be a wire case without inventing them."""


@dataclass(frozen=True)
class PlatformFacts:
    gpu_name: str
    cuda: bool
    host: dict[str, Any]
    peaks_tf: dict[str, float]
    hbm_gbps: float | None
    nvlink_gbps_per_direction: float | None
    peaks_source: str  # "datasheet", "matrix override", "none"
    nvlink_fields: str | None = None  # the NVML fields that gave NVLink counters at start-up
    peaks_absent: dict[str, str] = field(default_factory=dict)  # precision: why no peak


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def build_case(spec: CaseSpec, matrix: Matrix, outcomes: list[RankOutcome],
               facts: PlatformFacts, bound: float) -> dict[str, Any]:
    shape = matrix.shape
    model = model_case(shape, spec, matrix.capacity_factor)
    outcomes = sorted(outcomes, key=lambda o: o.rank)
    first = outcomes[0]  # windows are already the maximum over ranks, the same everywhere
    failure = "; ".join(f"rank {o.rank}, {o.failure}" for o in outcomes if o.failure) or None
    if first.combined is None or first.forward is None:
        raise Unmeasured("; ".join(n for n in (first.oom_note, failure) if n)
                         or "no time was measured")
    layer_ms = _median(first.combined)
    error = first.numerical_error
    forward_flops = model.forwardFlops
    payload = int(logical_payload_rank0(first.rows_sent_off_rank, shape))
    saved = model.savedBytes
    slot = max(saved, default=0)
    scratch = runner_scratch_bytes(shape, spec, matrix.capacity_factor)
    windows: dict[str, list[float]] = {"combined": first.combined, "forward": first.forward}
    if first.backward is not None:
        windows["backward"] = first.backward
    tx = [o.nvlink_tx_gbps for o in outcomes]
    rx = [o.nvlink_rx_gbps for o in outcomes]
    measured_nvlink = all(v is not None for v in (*tx, *rx))
    allocated = [o.allocated_peak_gib for o in outcomes if o.allocated_peak_gib is not None]
    reserved = [o.reserved_peak_gib for o in outcomes if o.reserved_peak_gib is not None]
    case: dict[str, Any] = {
        "id": spec.id, "mode": spec.mode, "ep": spec.ep, "category": spec.category,
        "F": spec.F, "imbalance": spec.imbalance, "precision": spec.precision,
        "pipeline": spec.pipeline,
        "forwardMS": _median(first.forward),
        "backwardMS": _median(first.backward) if first.backward is not None else None,
        "layerMS": layer_ms,
        "windows": windows,
        "usefulTFPerGPU": model.useful_tf_per_gpu(layer_ms),
        "nvlinkTXGBps": statistics.fmean(tx) if measured_nvlink else None,  # type: ignore[arg-type]
        "nvlinkRXGBps": statistics.fmean(rx) if measured_nvlink else None,  # type: ignore[arg-type]
        "nvlinkMaxTXGBps": max(tx) if measured_nvlink else None,  # type: ignore[type-var]
        "nvlinkMaxRXGBps": max(rx) if measured_nvlink else None,  # type: ignore[type-var]
        "analyticalHBMGBps": model.hbm_gbps(layer_ms),
        "receiveRows": [o.rows_received for o in outcomes],
        "slotBytes": slot, "scratchBytes": scratch, "arenaBytes": slot + scratch,
        "savedBytes": saved, "inputBytes": model.inputBytes, "hostScratchBytes": 0,
        "allocatedPeakGiB": max(allocated) if allocated else None,
        "reservedPeakGiB": max(reserved) if reserved else None,
        "recompute": [False] if spec.training else [],
        "numericalAccepted": error <= bound if error is not None else None,
        "graphAccepted": first.graph_accepted,
        "allocationRetries": sum(o.allocation_retries for o in outcomes),
        "ooms": sum(o.ooms for o in outcomes),
        "logicalForwardPayloadBytesRank0": payload,
        "forwardFlopsPerLogicalPayloadByteRank0": forward_flops / payload if payload else None,
        "capacityRows": model.capacityRows,
        "emulated": any(o.emulated for o in outcomes),
        "failure": failure,
        **phase_fields(outcomes, _median(first.forward),
                       _median(first.backward) if first.backward is not None else None),
        **gpu_state_fields(outcomes),
        # Beyond the wire format's known fields (kept by the service as they are):
        "numericalRelativeError": error,
        "numericalBound": bound,
    }
    kernels = sorted({k for o in outcomes if o.expert_kernel
                      for k in o.expert_kernel.split("+")})
    if kernels:
        case["expertKernel"] = "+".join(kernels)
    scalings = sorted({s for o in outcomes if o.fp8_scaling for s in o.fp8_scaling.split("+")})
    case["fp8Scaling"] = "+".join(scalings) or None  # null: not an fp8 case
    if first.iterations:
        case["iterationMS"] = {kind: iteration_percentiles(times)
                               for kind, times in first.iterations.items() if times}
    setup = [o.setup_s for o in outcomes if o.setup_s is not None]
    wall = [o.wall_s for o in outcomes if o.wall_s is not None]
    if setup:
        case["setupS"] = max(setup)
    if wall:
        case["wallS"] = max(wall)
    # Null where the layer was not compiled (the timing note says so), not left out.
    compiles = [o for o in outcomes if o.compile_s is not None]
    case["compileS"] = max(o.compile_s or 0.0 for o in compiles) if compiles else None
    case["compiledGraphs"] = (max(o.compiled_graphs or 0 for o in compiles) if compiles
                              else None)
    if first.oom_note and case["ooms"]:
        case["oomNote"] = (f"{first.oom_note}; that phase and the later ones were not "
                           f"measured (their fields are null)")
    return wire_dict(validate_case(case))


PERCENTILES = (50, 90, 99)
TAILS = ("iterationMS: p50/p90/p99 of every timed iteration (windows x iterations of them, "
         "each the maximum over ranks; linear interpolation). setupS: wall seconds from a "
         "case's start to its first timed window (weights, quantization, routing, graph "
         "capture and compilation, the first warm-up); wallS: the whole case, slowest rank. "
         "A compiled layer (mega on CUDA) adds compileS, the seconds torch.compile spent "
         "compiling during the case (dynamo's account, forward and backward graphs; part "
         "of setupS when in the first warm-up), and compiledGraphs, the graphs it "
         "compiled: 0 and 0 where the case reused the layer compiled for an earlier case "
         "of its shape (the routing, i.e. the imbalance, is not part of the graph); both "
         "null where the layer ran uncompiled.")


def iteration_percentiles(times: list[float]) -> dict[str, float]:
    """p50, p90, p99 of the iteration times, interpolated linearly between the closest
    ranks (numpy's default, ``statistics.quantiles``' "inclusive")."""
    if len(times) == 1:
        return {f"p{p}": float(times[0]) for p in PERCENTILES}
    cuts = statistics.quantiles(times, n=100, method="inclusive")
    return {f"p{p}": float(cuts[p - 1]) for p in PERCENTILES}


def expert_note(host: dict[str, Any]) -> str:
    """Which kernel the expert GEMMs ran, why, and the versions it ran on (read when the
    run started, ``runner.platform.host_info``)."""
    if host.get("groupedMM"):
        kernel = ("torch._grouped_mm, one kernel per GEMM (gate, up, down) for all of a "
                  "rank's experts: the start-up probe ran its forward and backward, with an "
                  "empty expert, and matched a matmul per expert")
    else:
        kernel = ("a Python loop over the experts, one matmul per expert and GEMM, because "
                  f"the start-up probe of torch._grouped_mm failed "
                  f"({host.get('groupedMMReason') or 'no reason recorded'}); those cases "
                  "carry the expert_loop caveat")
    versions = ", ".join(f"{name} {host.get(key) or 'none'}" for name, key in (
        ("torch", "torch"), ("CUDA", "cuda"), ("NCCL", "nccl"), ("driver", "driver")))
    return (f"Expert GEMMs (bf16 and emulated precisions): {kernel}. Native block-scaled "
            f"GEMMs run one torch._scaled_mm per expert (scaled_mm_loop). Each case's "
            f"expertKernel names the kernels its timed passes ran. Versions read at run "
            f"time: {versions}.")


def timing_note(timing: Timing, cuda: bool) -> str:
    """How the times were taken: warm-up, L2 flush, windows, reduction over ranks."""
    warmup = (f"warm-up of at least {timing.warmup} iteration(s) and {timing.warmup_ms:g} ms "
              f"(the count agreed over ranks: the slowest rank's)")
    flush = {True: "always", False: "never", None: "for inference (not for training)"}[
        timing.flush_l2]
    if cuda:
        return (f"CUDA events around I iterations per window of CUDA-graph replays where "
                f"capture succeeded on every rank (inference: the forward pass; training: "
                f"the whole step, and forward and backward as two graphs), else eager (the "
                f"case's graphNote says why); {warmup}; L2 flushed {flush}: a 256 MiB "
                f"buffer zeroed before each timed iteration, outside the timed region (a "
                f"pair of events per iteration; the buffer is left out of the memory peaks); "
                f"then the maximum over ranks per window, median of the windows; forward, "
                f"backward and combined reduced separately (inference: the combined step "
                f"is the forward pass, one set of windows serves both). {TAILS}")
    return (f"CPU run: wall clock (time.perf_counter) around each iteration, no CUDA graphs "
            f"or events; {warmup}; no L2 flush on the CPU; then the maximum over ranks per "
            f"window (all-reduce MAX over gloo), median of the windows; forward, backward "
            f"and combined reduced separately (inference: the combined step is the forward "
            f"pass, one set of windows serves both). {TAILS} CPU times say nothing about "
            f"GPU speed.")


# The case fields phase_fields gives (all of them, null where they do not apply).
PHASE_FIELDS = (
    "phaseMS", "phaseMeanMS", "backwardPhaseMS", "backwardPhaseMeanMS", "dispatchGBps",
    "combineGBps", "dispatchLocalBytes", "dispatchRemoteBytes", "combineLocalBytes",
    "combineRemoteBytes", "phaseSumMS", "phaseGapMS", "phaseGapPercent",
    "backwardPhaseSumMS", "backwardPhaseGapMS", "backwardPhaseGapPercent", "phaseNote",
    "phaseGraphs", "phaseGraphNote",
)


def phase_fields(outcomes: list[RankOutcome], forward_ms: float,
                 backward_ms: float | None) -> dict[str, Any]:
    """The phase pass's fields: each phase's median of the windows' maxima over ranks
    (``phaseMS``, as the layer's times) and the mean over ranks of each rank's median
    (``phaseMeanMS``); training's ``backwardPhaseMS`` alike; the bytes each rank received
    from itself and from the others; the bandwidth of the busiest rank's rows that crossed
    (null when none did); the phases' sum against the layer's time. Null fields when the
    phase pass did not run on every rank (or a phase took no measurable time)."""
    first = outcomes[0]
    none: dict[str, Any] = dict.fromkeys(PHASE_FIELDS)
    if first.phase_windows is None or any(
            o.phase_rank_ms is None or o.dispatch_remote_bytes is None for o in outcomes):
        return none
    ms = {name: _median(values) for name, values in first.phase_windows.items()}
    if min(ms.values()) <= 0:
        return none
    fields: dict[str, Any] = {
        **none,  # every field present, null where it does not apply (inference: backward)
        "phaseMS": ms,
        "phaseMeanMS": _rank_means([o.phase_rank_ms for o in outcomes]),
    }
    back = None
    if first.backward_phase_windows is not None:
        back = {name: _median(v) for name, v in first.backward_phase_windows.items()}
        if min(back.values()) > 0:
            fields["backwardPhaseMS"] = back
            fields["backwardPhaseMeanMS"] = _rank_means(
                [o.backward_phase_rank_ms for o in outcomes])
        else:
            back = None
    for phase in ("dispatch", "combine"):
        local = [int(getattr(o, f"{phase}_local_bytes") or 0) for o in outcomes]
        remote = [int(getattr(o, f"{phase}_remote_bytes") or 0) for o in outcomes]
        fields[f"{phase}LocalBytes"] = local
        fields[f"{phase}RemoteBytes"] = remote
        busiest = max(remote)
        fields[f"{phase}GBps"] = busiest / (ms[phase] * 1e-3) / 1e9 if busiest else None
    fields.update(phase_gap(ms, forward_ms, back, backward_ms))
    fields["phaseGraphs"] = first.phase_graphs
    notes = [o.phase_graph_note for o in outcomes if o.phase_graph_note]
    fields["phaseGraphNote"] = notes[0] if notes else None
    return fields


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


def gpu_state_fields(outcomes: list[RankOutcome]) -> dict[str, Any]:
    state = merge_gpu_states([o.gpu_state for o in outcomes])
    if state is not None:
        return {"gpuState": state, "gpuStateReason": None}
    reasons = [f"rank {o.rank}: {o.gpu_state_reason}" for o in outcomes if o.gpu_state_reason]
    reason = (outcomes[0].gpu_state_reason if len({o.gpu_state_reason for o in outcomes}) == 1
              else "; ".join(reasons))
    return {"gpuState": None, "gpuStateReason": reason or "no GPU state was sampled"}


def merge_gpu_states(states: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One case's ``gpuState`` over its ranks: the widest clock range, the lowest rank's
    median SM clock, the highest power and temperature, every reason any rank saw, power
    capped or clocks locked on any rank (locked unknown if some rank could not say and
    none was locked); null unless every rank has one."""
    known = [s for s in states if s is not None]
    if not known or len(known) < len(states):
        return None
    bits = 0
    for s in known:
        bits |= int(s["throttleReasons"])
    merged: dict[str, Any] = {
        "smClockMinMHz": min(s["smClockMinMHz"] for s in known),
        "smClockMaxMHz": max(s["smClockMaxMHz"] for s in known),
        "powerMaxW": max(s["powerMaxW"] for s in known),
        "temperatureMaxC": max(s["temperatureMaxC"] for s in known),
        "throttleReasons": bits,
        "throttleReasonNames": clock_event_names(bits),
        "samples": sum(int(s["samples"]) for s in known),
    }
    medians = [s.get("smClockMedianMHz") for s in known]
    if all(m is not None for m in medians):
        merged["smClockMedianMHz"] = min(medians)  # type: ignore[type-var]  # the slowest GPU's
    if all("powerCapped" in s for s in known):
        merged["powerCapped"] = any(s["powerCapped"] for s in known)
    locked = [s.get("clocksLocked") for s in known]
    if "clocksLocked" in known[0]:
        merged["clocksLocked"] = (True if any(locked) else
                                  False if all(v is False for v in locked) else None)
    return merged


def _notes(facts: PlatformFacts, matrix_timing: Timing, pipeline_notes: list[str],
           skipped: list[str], graph_notes: list[str]) -> dict[str, str]:
    timing = timing_note(matrix_timing, facts.cuda)
    peak = {
        "datasheet": "Peak values are theoretical NVIDIA datasheet specifications, not "
                     "benchmarked ceilings.",
        "matrix override": "Peak values come from the matrix file's [peaks] table.",
        "none": "No theoretical peaks are known for this device: % of peak is not given.",
    }[facts.peaks_source]
    peak += "".join(f" {p}: {why}." for p, why in facts.peaks_absent.items()
                    if p not in facts.peaks_tf)
    notes = {
        "peakNote": peak,
        "timingNote": timing,
        "bandwidthNote": (
            f"NVLink TX/RX are NVML data counters ({facts.nvlink_fields}) summed over each "
            f"GPU's links, over a loop of at least one second, mean and max over ranks."
            if facts.nvlink_fields else
            "NVLink not measured (no NVML NVLink counters on this GPU: no NVML, or no "
            "NVLink): the NVLink fields are null." if facts.cuda else
            "NVLink not measured (no GPU, no NVML): the NVLink fields are null.")
        + " HBM is an analytical useful-byte estimate, not a DRAM-counter measurement.",
        "placementNote": "All ranks of a case run on the ranks 0..EP-1 of this launch.",
        "memoryNote": (
            "slot/scratch/arena/saved bytes are the runner's accounting (slot: the largest "
            "per-rank saved bytes of training; scratch: docs/metrics.md's bf16 per-row widths over "
            "capacityRows, plus uint8 wire rows for quantized dispatch), not allocator "
            "measurements. " + ("allocated/reserved peaks are torch.cuda maxima over ranks, "
                                "reset after the earlier case's cached blocks were freed "
                                "and read after the layer's timings, before the phase "
                                "pass and the float32 reference."
                                if facts.cuda else
                                "No allocator peaks on the CPU: those fields are null.")
            + " An out-of-memory error is caught per rank and agreed over the ranks after "
            "each phase of a case (build, timings, numerical check, NVLink); the case ends "
            "there on every rank and is still reported, with `ooms` counted, the fields of "
            "the unmeasured phases null and the phase named in the case's `oomNote`. A case "
            "whose times could not be measured at all is skipped: it is listed in the "
            "`runtimeSkipped` field of the next case posted (and in --out's "
            "runtimeSkippedNote)."),
        "precisionNote": (
            "mxfp8 and nvfp4 quantize to the exact block formats (mxfp8: e4m3 + e8m0 scale "
            "per 32; nvfp4: e2m1 + e4m3 scale per 16 + fp32 tensor scale, one per expert "
            "weight and one per GEMM input; ties round to even). The expert weights are "
            "quantized once, when the layer is built; a timed step quantizes only its "
            "activations (the rows once over all experts, the hidden activation once). Rows "
            "a quantized dispatch delivered are on the grid already: the emulation does not "
            "round them again, and the native GEMM takes them as the wire delivered them, "
            "with the senders' block scales (nvfp4: the dispatch agrees one fp32 tensor "
            "scale over the EP group, from the largest sender's amax, by a one-element "
            "all-reduce, as torch._scaled_mm takes one per operand). Native "
            "block-scaled GEMMs (torch._scaled_mm, expert by expert) run where the start-up "
            "probe ran them and matched the emulated GEMM, for inference in the standard "
            "and staged pipelines; elsewhere (training: no scaled-GEMM backward here; "
            "mega: compiled emulation) the GEMMs emulate: dequantize, bf16 GEMM. A case "
            "says emulated=false only when all its expert GEMMs ran natively. mxfp8 and "
            "nvfp4 have no grouped scaled GEMM here: torch._scaled_grouped_mm's kernels for "
            "them are Blackwell-only (sm_100, FBGEMM/MSLK builds) and not validated on "
            "hardware, so they run one torch._scaled_mm per expert. fp8 is e4m3 with fp32 "
            "scales (DeepSeek-V3's recipe): 1x128 along each row of activations (a "
            "dispatched row is D + 4*D/128 bytes), 128x128 tiles of weights; natively "
            "blockwise through torch._scaled_mm per expert (cuBLAS, sm_90 only), else "
            "rowwise (one scale per row) through torch._scaled_grouped_mm (sm_90/sm_100); "
            "the recipe the GEMMs used is each case's fp8Scaling, what the probe tried is "
            "the host's fp8Native. Probe: "
            + ", ".join(f"{p} {'ran' if ran else 'unavailable'}"
                        for p, ran in facts.host.get("nativeScaledGEMM", {}).items())
            + "."),
        "expertNote": expert_note(facts.host),
        "numericsNote": ERROR_BOUND_NOTE,
        "phaseNote": PHASE_NOTE,
        "gpuStateNote": (
            "gpuState: NVML samples every 20 ms over each case's timed windows (not its "
            "warm-up), SM clock min/median/max (median: the lowest rank's), the highest "
            "power and temperature, and every clocks-event (throttle) reason seen, over all "
            "ranks. A thermal, hardware-slowdown or power-brake reason gives the case the "
            "'throttled' caveat; sw_power_cap (the board's power limit, which most "
            "compute-bound work meets) does not: powerCapped says it was seen. "
            "clocksLocked: the applications clocks differ from their defaults or the "
            "applications_clocks_setting reason was seen (null where NVML could not say)."
            if facts.cuda else
            "gpuState is null on the CPU (no GPU, no NVML); gpuStateReason says so."),
        "pipelineNote": "; ".join(pipeline_notes),
    }
    if graph_notes:
        notes["graphNote"] = "; ".join(dict.fromkeys(graph_notes))
    if skipped:
        notes["skippedNote"] = "Skipped: " + "; ".join(skipped)
    return notes


def build_meta(matrix: Matrix, facts: PlatformFacts, run_id: str, pipeline_notes: list[str],
               skipped: list[str], graph_notes: list[str],
               ceilings: dict[str, Any] | None = None) -> dict[str, Any]:
    shape = matrix.shape
    meta: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).date().isoformat(),
        "gpu": facts.gpu_name,
        "shape": {"T": shape.T, "D": shape.D, "E": shape.E, "K": shape.K,
                  "defaultF": matrix.cases[0].F, "layers": 1, "sharedExperts": 0},
        "theoreticalTFPerGPU": facts.peaks_tf,
        "theoreticalHBMGBps": facts.hbm_gbps,
        "theoreticalNVLinkGBpsPerDirection": facts.nvlink_gbps_per_direction,
        "theoreticalNVLinkGBpsBidirectional": (2 * facts.nvlink_gbps_per_direction
                                               if facts.nvlink_gbps_per_direction else None),
        **_notes(facts, matrix.timing, pipeline_notes, skipped, graph_notes),
        "source": f"moescope runner (torch {facts.host.get('torch')})",
        "runId": run_id,
        "host": facts.host,
        "timing": {"windows": matrix.timing.windows, "iterations": matrix.timing.iterations,
                   "warmup": matrix.timing.warmup, "warmupMS": matrix.timing.warmup_ms,
                   "flushL2": matrix.timing.flush_l2},
        "seed": matrix.seed,
        "capacityFactor": matrix.capacity_factor,
        "ep1Group": matrix.ep1_group,
        "measuredCeilings": ceilings,
        "measuredCeilingNote": ceiling_note(facts.cuda, ceilings),
    }
    return meta


def check_service_accepts(meta: dict[str, Any], cases: list[dict[str, Any]]) -> None:
    """Raise ingest's InvalidPayload when the service would refuse this report."""
    validate_report({"meta": meta, "cases": cases})


def block_size_problem(shape: Shape, spec: CaseSpec) -> str | None:
    if not spec.quantized:
        return None
    block = BLOCK_ELEMENTS[spec.precision]
    for name, value in (("D", shape.D), ("F", spec.F)):
        if value % block:
            return f"{name}={value} is not a multiple of {spec.precision}'s {block}-element block"
    return None
