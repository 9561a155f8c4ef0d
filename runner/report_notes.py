"""The report's notes: how each number in it was taken, in words, for the meta of a run
(``runner.report.build_meta``). Torch-free."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runner.matrix import Timing
from runner.phase_report import GBPS_NOTE, PHASE_NOTE

if TYPE_CHECKING:
    from runner.report import PlatformFacts

ERROR_BOUND_NOTE = ("numericalAccepted: relative Frobenius error against a float32 "
                    "reference of the same routed layer (training: worst of output and all "
                    "gradients), bounds bf16 2e-2, mxfp8 1.2e-1, nvfp4 3.5e-1")


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


def _peak_note(facts: PlatformFacts) -> str:
    peak = {
        "datasheet": "Peak values are theoretical NVIDIA datasheet specifications, not "
                     "benchmarked ceilings.",
        "matrix override": "Peak values come from the matrix file's [peaks] table.",
        "none": "No theoretical peaks are known for this device: % of peak is not given.",
    }[facts.peaks_source]
    return peak + "".join(f" {p}: {why}." for p, why in facts.peaks_absent.items()
                          if p not in facts.peaks_tf)


def _bandwidth_note(facts: PlatformFacts) -> str:
    return (
        f"NVLink TX/RX are NVML data counters ({facts.nvlink_fields}) summed over each "
        f"GPU's links, over a loop of at least one second, mean and max over ranks."
        if facts.nvlink_fields else
        "NVLink not measured (no NVML NVLink counters on this GPU: no NVML, or no "
        "NVLink): the NVLink fields are null." if facts.cuda else
        "NVLink not measured (no GPU, no NVML): the NVLink fields are null."
    ) + " HBM is an analytical useful-byte estimate, not a DRAM-counter measurement. " + GBPS_NOTE


def _memory_note(cuda: bool) -> str:
    return (
        "slot/scratch/arena/saved bytes are the runner's accounting (slot: the largest "
        "per-rank saved bytes of training; scratch: docs/metrics.md's bf16 per-row widths over "
        "capacityRows, plus uint8 wire rows for quantized dispatch), not allocator "
        "measurements. " + ("allocated/reserved peaks are torch.cuda maxima over ranks, "
                            "reset after the earlier case's cached blocks were freed "
                            "and read after the layer's timings, before the phase "
                            "pass and the float32 reference."
                            if cuda else
                            "No allocator peaks on the CPU: those fields are null.")
        + " An out-of-memory error is caught per rank and agreed over the ranks after "
        "each phase of a case (build, timings, numerical check, NVLink); the case ends "
        "there on every rank and is still reported, with `ooms` counted, the fields of "
        "the unmeasured phases null and the phase named in the case's `oomNote`. A case "
        "whose times could not be measured at all is skipped: it is listed in the "
        "`runtimeSkipped` field of the next case posted (and in --out's "
        "runtimeSkippedNote).")


def _precision_note(host: dict[str, Any]) -> str:
    return (
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
        "and staged pipelines, and for fp8 training too (Fprop, Dgrad and Wgrad "
        "scaled: dy 1x128 e4m3, x and dy along each expert's tokens for Wgrad; bf16 "
        "outputs); elsewhere (mxfp8/nvfp4 training: no scaled-GEMM backward here; "
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
                    for p, ran in host.get("nativeScaledGEMM", {}).items())
        + ".")


def _gpu_state_note(cuda: bool) -> str:
    if not cuda:
        return "gpuState is null on the CPU (no GPU, no NVML); gpuStateReason says so."
    return (
        "gpuState: NVML samples every 20 ms over each case's timed windows (not its "
        "warm-up), SM clock min/median/max (median: the lowest rank's), the highest "
        "power and temperature, and every clocks-event (throttle) reason seen, over all "
        "ranks. A thermal, hardware-slowdown or power-brake reason gives the case the "
        "'throttled' caveat; sw_power_cap (the board's power limit, which most "
        "compute-bound work meets) does not: powerCapped says it was seen. "
        "clocksLocked: the applications clocks differ from their defaults or the "
        "applications_clocks_setting reason was seen (null where NVML could not say).")


def meta_notes(facts: PlatformFacts, matrix_timing: Timing, pipeline_notes: list[str],
               skipped: list[str], graph_notes: list[str]) -> dict[str, str]:
    """Every note of a run's meta, keyed by its wire field."""
    notes = {
        "peakNote": _peak_note(facts),
        "timingNote": timing_note(matrix_timing, facts.cuda),
        "bandwidthNote": _bandwidth_note(facts),
        "placementNote": "All ranks of a case run on the ranks 0..EP-1 of this launch.",
        "memoryNote": _memory_note(facts.cuda),
        "precisionNote": _precision_note(facts.host),
        "expertNote": expert_note(facts.host),
        "numericsNote": ERROR_BOUND_NOTE,
        "phaseNote": PHASE_NOTE,
        "gpuStateNote": _gpu_state_note(facts.cuda),
        "pipelineNote": "; ".join(pipeline_notes),
    }
    if graph_notes:
        notes["graphNote"] = "; ".join(dict.fromkeys(graph_notes))
    if skipped:
        notes["skippedNote"] = "Skipped: " + "; ".join(skipped)
    return notes
