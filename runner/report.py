"""The report the runner posts: meta and cases as wire dicts, checked with ``ingest``'s
own validation so the runner cannot produce what the service rejects. Torch-free."""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass, field
from typing import Any

from ingest.precisions import BLOCK_ELEMENTS
from ingest.schema import wire_dict
from ingest.validate import validate_case, validate_report
from runner.ceilings import ceiling_note
from runner.matrix import Matrix
from runner.model import logical_payload_rank0, model_case, runner_scratch_bytes
from runner.phase_report import phase_fields
from runner.report_gpustate import gpu_state_fields
from runner.report_notes import meta_notes
from runner.spec import CaseSpec, Shape


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
    # ... and to the other ranks (the combine: sent back)
    dispatch_sent_remote_bytes: int | None = None
    combine_sent_remote_bytes: int | None = None
    # runner.phase_clock: per phase, per window (max over ranks), inside the layer's step;
    # the note says how they were timed, or why not
    in_layer_phase_windows: dict[str, list[float]] | None = None
    in_layer_backward_phase_windows: dict[str, list[float]] | None = None  # training
    in_layer_note: str | None = None
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
    case: dict[str, Any] = {
        "id": spec.id, "mode": spec.mode, "ep": spec.ep, "category": spec.category,
        "F": spec.F, "imbalance": spec.imbalance, "precision": spec.precision,
        "pipeline": spec.pipeline,
        "forwardMS": _median(first.forward),
        "backwardMS": _median(first.backward) if first.backward is not None else None,
        "layerMS": layer_ms,
        "windows": windows,
        "usefulTFPerGPU": model.useful_tf_per_gpu(layer_ms),
        **_nvlink_fields(outcomes),
        "analyticalHBMGBps": model.hbm_gbps(layer_ms),
        "receiveRows": [o.rows_received for o in outcomes],
        "slotBytes": slot, "scratchBytes": scratch, "arenaBytes": slot + scratch,
        "savedBytes": saved, "inputBytes": model.inputBytes, "hostScratchBytes": 0,
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
        "dispatchMode": matrix.dispatch.mode,
        "dispatchDedup": matrix.dispatch.dedup,
        **phase_fields(outcomes, _median(first.forward),
                       _median(first.backward) if first.backward is not None else None),
        **gpu_state_fields(outcomes),
        # Beyond the wire format's known fields (kept by the service as they are):
        "numericalRelativeError": error,
        "numericalBound": bound,
    }
    case.update(_run_fields(outcomes))
    if first.oom_note and case["ooms"]:
        case["oomNote"] = (f"{first.oom_note}; that phase and the later ones were not "
                           f"measured (their fields are null)")
    return wire_dict(validate_case(case))


def _nvlink_fields(outcomes: list[RankOutcome]) -> dict[str, Any]:
    """Mean and max over ranks of the NVLink rates, and the allocator peaks' maxima."""
    tx = [o.nvlink_tx_gbps for o in outcomes]
    rx = [o.nvlink_rx_gbps for o in outcomes]
    measured = all(v is not None for v in (*tx, *rx))
    allocated = [o.allocated_peak_gib for o in outcomes if o.allocated_peak_gib is not None]
    reserved = [o.reserved_peak_gib for o in outcomes if o.reserved_peak_gib is not None]
    return {
        "nvlinkTXGBps": statistics.fmean(tx) if measured else None,  # type: ignore[arg-type]
        "nvlinkRXGBps": statistics.fmean(rx) if measured else None,  # type: ignore[arg-type]
        "nvlinkMaxTXGBps": max(tx) if measured else None,  # type: ignore[type-var]
        "nvlinkMaxRXGBps": max(rx) if measured else None,  # type: ignore[type-var]
        "allocatedPeakGiB": max(allocated) if allocated else None,
        "reservedPeakGiB": max(reserved) if reserved else None,
    }


def _run_fields(outcomes: list[RankOutcome]) -> dict[str, Any]:
    """Expert kernels, iteration tails, setup, wall and compile time over the ranks."""
    first = outcomes[0]
    case: dict[str, Any] = {}
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
    return case


PERCENTILES = (50, 90, 99)


def iteration_percentiles(times: list[float]) -> dict[str, float]:
    """p50, p90, p99 of the iteration times, interpolated linearly between the closest
    ranks (numpy's default, ``statistics.quantiles``' "inclusive")."""
    if len(times) == 1:
        return {f"p{p}": float(times[0]) for p in PERCENTILES}
    cuts = statistics.quantiles(times, n=100, method="inclusive")
    return {f"p{p}": float(cuts[p - 1]) for p in PERCENTILES}




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
        **meta_notes(facts, matrix.timing, pipeline_notes, skipped, graph_notes),
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
