"""Pydantic v2 models of the wire format (docs/wire-format.md).

The same models validate a report in the service and build one in the runner, so the
runner cannot post what the service rejects. Every model keeps unknown fields
(``extra="allow"``): a newer runner may add metrics before the service knows them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# Postgres BIGINT: integer metrics become real columns, so they must fit one.
INT64_MAX = 2**63 - 1
# Postgres INTEGER, for the columns that are one (ep, ids).
INT32_MAX = 2**31 - 1

PositiveMS = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
Count = Annotated[int, Field(ge=0, le=INT64_MAX)]
Bytes = Annotated[int, Field(ge=0, le=INT64_MAX)]
PositiveCount = Annotated[int, Field(gt=0, le=INT64_MAX)]
Name = Annotated[str, Field(min_length=1, max_length=200)]


class WireModel(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False, populate_by_name=True)


class Shape(WireModel):
    T: PositiveCount
    D: PositiveCount
    E: PositiveCount
    K: PositiveCount
    defaultF: PositiveCount | None = None
    layers: PositiveCount | None = None
    sharedExperts: Count | None = None


class GroupedCeiling(WireModel):
    """The expert GEMMs alone (gate, up, down of ``experts`` SwiGLU experts, each with
    ``rowsPerExpert`` rows) at a case's shape: the best the GEMMs reach there. With
    ``pipeline``: as that pipeline runs them (``gemmExperts`` experts of
    ``gemmRowsPerExpert`` rows, padded, in each of ``stages`` GEMMs a pass); without: any
    pipeline's (an older runner's)."""

    precision: Name
    experts: PositiveCount
    rowsPerExpert: Count
    D: PositiveCount
    F: PositiveCount
    pipeline: Name | None = None
    # training: forward and backward GEMMs (the case's useful FLOPs); None: an older
    # runner's forward GEMMs, taken for either mode
    mode: Literal["inference", "training"] | None = None
    gemmExperts: Count | None = None  # experts with rows in one of its GEMMs
    gemmRowsPerExpert: Count | None = None
    stages: PositiveCount | None = None
    tf: Annotated[float, Field(gt=0)]  # the slowest GPU's: useful (unpadded) FLOPs / time
    gemmTF: NonNegativeFloat | None = None  # the same with the padded rows counted
    tfPerGPU: list[NonNegativeFloat] = Field(default_factory=list)
    kernel: Name
    emulated: bool = False  # a quantized precision measured through its bf16 emulation


class AllToAllSize(WireModel):
    bytes: PositiveCount  # each rank's send buffer
    ms: PositiveMS
    algbwGBps: NonNegativeFloat
    busbwGBps: NonNegativeFloat


class AllToAllCeiling(WireModel):
    ep: PositiveCount
    sizes: Annotated[list[AllToAllSize], Field(min_length=1)]
    busbwGBps: NonNegativeFloat  # the best over the sizes


class MeasuredCeilings(WireModel):
    """What this run measured on its own GPUs before the cases (``runner.ceilings``)."""

    denseTF: dict[Name, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)
    denseTFPerGPU: dict[Name, list[NonNegativeFloat]] = Field(default_factory=dict)
    denseN: PositiveCount | None = None
    grouped: list[GroupedCeiling] = Field(default_factory=list)
    allToAll: list[AllToAllCeiling] = Field(default_factory=list)
    unmeasured: dict[Name, Annotated[str, Field(max_length=1000)]] = Field(default_factory=dict)


class Meta(WireModel):
    date: Name
    gpu: Name
    shape: Shape
    theoreticalTFPerGPU: dict[Name, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)
    theoreticalHBMGBps: Annotated[float, Field(gt=0)] | None = None
    theoreticalNVLinkGBpsPerDirection: Annotated[float, Field(gt=0)] | None = None
    theoreticalNVLinkGBpsBidirectional: Annotated[float, Field(gt=0)] | None = None
    measuredCeilings: MeasuredCeilings | None = None
    source: str | None = None
    runId: Annotated[str, Field(min_length=1, max_length=200)] | None = None


class Windows(WireModel):
    combined: Annotated[list[PositiveMS], Field(min_length=1)]
    forward: Annotated[list[PositiveMS], Field(min_length=1)] | None = None
    backward: Annotated[list[PositiveMS], Field(min_length=1)] | None = None


class PhaseMS(WireModel):
    """Median over windows of each phase timed on its own (after a barrier)."""

    dispatch: PositiveMS
    experts: PositiveMS
    combine: PositiveMS
    route: PositiveMS | None = None
    # Quantized dispatch: the rows packed to the wire format and unpacked, timed apart.
    quantize: PositiveMS | None = None


class BackwardPhaseMS(WireModel):
    """Training: the backward pass's phases, each timed on its own like ``PhaseMS``."""

    combine: PositiveMS
    experts: PositiveMS
    dispatch: PositiveMS


class GpuState(WireModel):
    """NVML samples over a case's timed windows, reduced over samples and ranks."""

    smClockMinMHz: NonNegativeFloat
    smClockMaxMHz: NonNegativeFloat
    powerMaxW: NonNegativeFloat
    temperatureMaxC: float
    # NVML clocks-event (throttle) reason bits seen in any sample, OR-ed, and their names.
    throttleReasons: Count
    throttleReasonNames: list[Name] = Field(default_factory=list)
    samples: PositiveCount
    smClockMedianMHz: NonNegativeFloat | None = None  # the lowest rank's median SM clock
    powerCapped: bool | None = None  # sw_power_cap seen: the power limit, informational
    clocksLocked: bool | None = None  # applications/locked clocks set; null: not readable


class IterationPercentiles(WireModel):
    """Percentiles of every timed iteration (each the maximum over ranks)."""

    p50: PositiveMS
    p90: PositiveMS
    p99: PositiveMS


class Case(WireModel):
    id: Annotated[str, Field(min_length=1, max_length=300)]
    mode: Literal["inference", "training"]
    ep: Annotated[int, Field(gt=0, le=INT32_MAX)]
    category: Name
    F: PositiveCount
    imbalance: Annotated[float, Field(ge=1)]
    precision: Name
    pipeline: Name
    forwardMS: PositiveMS
    backwardMS: PositiveMS | None = None
    layerMS: PositiveMS
    windows: Windows
    usefulTFPerGPU: NonNegativeFloat
    nvlinkTXGBps: NonNegativeFloat | None = None
    nvlinkRXGBps: NonNegativeFloat | None = None
    nvlinkMaxTXGBps: NonNegativeFloat | None = None
    nvlinkMaxRXGBps: NonNegativeFloat | None = None
    analyticalHBMGBps: NonNegativeFloat | None = None
    receiveRows: list[Count] = Field(default_factory=list)
    slotBytes: Bytes | None = None
    scratchBytes: Bytes | None = None
    arenaBytes: Bytes | None = None
    savedBytes: list[Bytes] = Field(default_factory=list)
    inputBytes: Bytes | None = None
    hostScratchBytes: Bytes | None = None
    allocatedPeakGiB: NonNegativeFloat | None = None
    reservedPeakGiB: NonNegativeFloat | None = None
    recompute: list[bool] = Field(default_factory=list)
    numericalAccepted: bool | None = None
    graphAccepted: bool | None = None
    allocationRetries: Count = 0
    ooms: Count = 0
    logicalForwardPayloadBytesRank0: Bytes | None = None
    forwardFlopsPerLogicalPayloadByteRank0: NonNegativeFloat | None = None
    capacityRows: Count | None = None
    emulated: bool = False
    phaseMS: PhaseMS | None = None
    dispatchGBps: NonNegativeFloat | None = None
    combineGBps: NonNegativeFloat | None = None
    # The phases' mean over ranks beside phaseMS's maxima; training's backward phases.
    phaseMeanMS: PhaseMS | None = None
    backwardPhaseMS: BackwardPhaseMS | None = None
    backwardPhaseMeanMS: BackwardPhaseMS | None = None
    # Per rank: bytes received from itself (local) and from the other ranks (remote).
    dispatchLocalBytes: list[Bytes] | None = None
    dispatchRemoteBytes: list[Bytes] | None = None
    combineLocalBytes: list[Bytes] | None = None
    combineRemoteBytes: list[Bytes] | None = None
    # The phases' sum against the layer's time of the same pass (gap = layer - sum).
    phaseSumMS: NonNegativeFloat | None = None
    phaseGapMS: float | None = None
    phaseGapPercent: float | None = None
    backwardPhaseSumMS: NonNegativeFloat | None = None
    backwardPhaseGapMS: float | None = None
    backwardPhaseGapPercent: float | None = None
    phaseNote: Annotated[str, Field(max_length=2000)] | None = None
    phaseGraphs: bool | None = None  # every phase replayed its own CUDA graph
    phaseGraphNote: Annotated[str, Field(max_length=2000)] | None = None
    # Per rank: bytes sent to the other ranks (the combine sends back what it received);
    # the rank with the largest remote max(TX, RX), whose bytes dispatchGBps/combineGBps
    # count.
    dispatchSentRemoteBytes: list[Bytes] | None = None
    combineSentRemoteBytes: list[Bytes] | None = None
    dispatchBusiestRank: Count | None = None
    combineBusiestRank: Count | None = None
    # The phases timed inside the layer's own step (the first view; phaseMS times each
    # alone): gap = the layer's forward - their sum, negative where they overlap.
    inLayerPhaseMS: PhaseMS | None = None
    inLayerPhaseSumMS: NonNegativeFloat | None = None
    inLayerPhaseGapMS: float | None = None
    inLayerPhaseNote: Annotated[str, Field(max_length=2000)] | None = None
    # Training: the same steps' backward, each phase from its gradient arriving to its
    # input's gradient leaving; gap = the layer's backward - their sum.
    inLayerBackwardPhaseMS: BackwardPhaseMS | None = None
    inLayerBackwardPhaseSumMS: NonNegativeFloat | None = None
    inLayerBackwardPhaseGapMS: float | None = None
    # The exchange: static splits, or counts exchanged on the device first (dynamic);
    # dedup: one row per (token, destination rank).
    dispatchMode: Literal["static", "dynamic"] | None = None
    dispatchDedup: bool | None = None
    gpuState: GpuState | None = None
    gpuStateReason: Annotated[str, Field(max_length=1000)] | None = None  # why gpuState is null
    # What ended the case other than an OOM (phase, exception type, message per rank).
    failure: Annotated[str, Field(min_length=1, max_length=2000)] | None = None
    # The expert GEMMs' kernel: "grouped_mm", "loop", "scaled_mm_loop", "+"-joined if several.
    expertKernel: Name | None = None
    # fp8's scaling recipe(s) those GEMMs used: "blockwise" (1x128 activations, 128x128
    # weights) or "rowwise", "+"-joined if several.
    fp8Scaling: Name | None = None
    # p50/p90/p99 of the iteration times per kind of window (combined, forward, backward).
    iterationMS: dict[Name, IterationPercentiles] | None = None
    setupS: NonNegativeFloat | None = None  # wall seconds before the first timed window
    wallS: NonNegativeFloat | None = None  # wall seconds of the whole case
    # A compiled layer (mega): seconds torch.compile spent in the case (part of setupS) and
    # the graphs it compiled, 0 where the case reused its shape's compiled layer.
    compileS: NonNegativeFloat | None = None
    compiledGraphs: Annotated[int, Field(ge=0)] | None = None


class Report(WireModel):
    """A whole report. Case ids are checked unique by ``ingest.validate``, which can
    name the offending index; a model validator could only blame the whole list."""

    meta: Meta
    cases: list[Case]


class CaseList(BaseModel):
    """Body of ``POST /reports/{id}/cases``: cases to append to an existing report."""

    model_config = ConfigDict(extra="forbid")

    cases: Annotated[list[Case], Field(min_length=1)]


def wire_dict(model: BaseModel) -> dict[str, Any]:
    """The model as wire JSON: known and unknown fields, nothing added by defaults."""
    return model.model_dump(mode="json", exclude_unset=True)
