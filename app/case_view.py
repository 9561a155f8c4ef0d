"""A case as the read path holds it: typed and frozen, one attribute per case field of
``app.case_fields.FIELDS`` under its wire name (tests/test_case_fields.py checks the names
and kinds), its caveats, and the wire fields this service does not know yet. Built once per
cached report (``report_view.ReportData.cases``) from the case the API serves
(``services.cases.case_out``): past the repository the screens, figures and exports read
these, so a misspelt field is a type error, not a silent None.

Over 60 lines in one class: one line per case field."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from app.case_fields import FIELDS
from ingest.attribution import Measured
from ingest.bounds import Bound

# The NVML record as the runner writes it (docs/wire-format.md, GPU state): clocks, power
# and temperature as numbers, the throttle reasons as names; read by key where shown.
GpuState = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class CaseCaveat:
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class CaseView:
    # What the wire requires (ingest.schema.Case) first; the rest as the wire defaults them.
    id: str
    mode: str
    ep: int
    precision: str
    pipeline: str
    category: str
    F: int  # noqa: N815 - the wire name
    imbalance: float
    layerMS: float  # noqa: N815
    forwardMS: float  # noqa: N815
    usefulTFPerGPU: float  # noqa: N815
    windows: Mapping[str, tuple[float, ...]]
    backwardMS: float | None = None  # noqa: N815
    percentOfPeak: float | None = None  # noqa: N815
    percentOfMeasuredCeiling: float | None = None  # noqa: N815
    hbmPercentOfPeak: float | None = None  # noqa: N815
    nvlinkTXPercentOfPeak: float | None = None  # noqa: N815
    nvlinkRXPercentOfPeak: float | None = None  # noqa: N815
    windowSpreadPercent: float | None = None  # noqa: N815
    observedImbalance: float | None = None  # noqa: N815
    hotRankFactor: float | None = None  # noqa: N815
    computeUtilPercent: float | None = None  # noqa: N815
    hbmUtilPercent: float | None = None  # noqa: N815
    nvlinkUtilPercent: float | None = None  # noqa: N815
    limiter: str | None = None
    imbalanceLossPercent: float | None = None  # noqa: N815
    communicationSharePercent: float | None = None  # noqa: N815
    allocatedPeakGiB: float | None = None  # noqa: N815
    reservedPeakGiB: float | None = None  # noqa: N815
    nvlinkTXGBps: float | None = None  # noqa: N815
    nvlinkRXGBps: float | None = None  # noqa: N815
    nvlinkMaxTXGBps: float | None = None  # noqa: N815
    nvlinkMaxRXGBps: float | None = None  # noqa: N815
    analyticalHBMGBps: float | None = None  # noqa: N815
    slotBytes: int | None = None  # noqa: N815
    scratchBytes: int | None = None  # noqa: N815
    arenaBytes: int | None = None  # noqa: N815
    inputBytes: int | None = None  # noqa: N815
    capacityRows: int | None = None  # noqa: N815
    logicalForwardPayloadBytesRank0: int | None = None  # noqa: N815
    forwardFlopsPerLogicalPayloadByteRank0: float | None = None  # noqa: N815
    hostScratchBytes: int | None = None  # noqa: N815
    emulated: bool = False
    numericalAccepted: bool | None = None  # noqa: N815
    graphAccepted: bool | None = None  # noqa: N815
    allocationRetries: int = 0  # noqa: N815
    ooms: int = 0
    receiveRows: tuple[int, ...] = ()  # noqa: N815
    savedBytes: tuple[int, ...] = ()  # noqa: N815
    recompute: tuple[bool, ...] = ()
    phaseMS: Mapping[str, float] | None = None  # noqa: N815
    phaseMeanMS: Mapping[str, float] | None = None  # noqa: N815
    backwardPhaseMS: Mapping[str, float] | None = None  # noqa: N815
    backwardPhaseMeanMS: Mapping[str, float] | None = None  # noqa: N815
    phaseSumMS: float | None = None  # noqa: N815
    phaseGapMS: float | None = None  # noqa: N815
    phaseGapPercent: float | None = None  # noqa: N815
    backwardPhaseSumMS: float | None = None  # noqa: N815
    backwardPhaseGapMS: float | None = None  # noqa: N815
    backwardPhaseGapPercent: float | None = None  # noqa: N815
    phaseNote: str | None = None  # noqa: N815
    phaseGraphs: bool | None = None  # noqa: N815
    phaseGraphNote: str | None = None  # noqa: N815
    dispatchGBps: float | None = None  # noqa: N815
    combineGBps: float | None = None  # noqa: N815
    dispatchLocalBytes: tuple[int, ...] | None = None  # noqa: N815
    dispatchRemoteBytes: tuple[int, ...] | None = None  # noqa: N815
    combineLocalBytes: tuple[int, ...] | None = None  # noqa: N815
    combineRemoteBytes: tuple[int, ...] | None = None  # noqa: N815
    dispatchSentRemoteBytes: tuple[int, ...] | None = None  # noqa: N815
    combineSentRemoteBytes: tuple[int, ...] | None = None  # noqa: N815
    dispatchBusiestRank: int | None = None  # noqa: N815
    combineBusiestRank: int | None = None  # noqa: N815
    inLayerPhaseMS: Mapping[str, float] | None = None  # noqa: N815
    inLayerPhaseSumMS: float | None = None  # noqa: N815
    inLayerPhaseGapMS: float | None = None  # noqa: N815
    inLayerPhaseNote: str | None = None  # noqa: N815
    inLayerBackwardPhaseMS: Mapping[str, float] | None = None  # noqa: N815
    inLayerBackwardPhaseSumMS: float | None = None  # noqa: N815
    inLayerBackwardPhaseGapMS: float | None = None  # noqa: N815
    dispatchMode: str | None = None  # noqa: N815
    dispatchDedup: bool | None = None  # noqa: N815
    gpuState: GpuState | None = None  # noqa: N815
    gpuStateReason: str | None = None  # noqa: N815
    failure: str | None = None
    expertKernel: str | None = None  # noqa: N815
    fp8Scaling: str | None = None  # noqa: N815
    iterationMS: Mapping[str, float] | None = None  # noqa: N815
    setupS: float | None = None  # noqa: N815
    wallS: float | None = None  # noqa: N815
    compileS: float | None = None  # noqa: N815
    compiledGraphs: int | None = None  # noqa: N815
    caveats: tuple[CaseCaveat, ...] = ()
    # Wire fields a newer runner sent that FIELDS does not declare: shown as sent.
    extra: Mapping[str, Any] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    # A note the charts' hover adds to the case's id (it moved against its history).
    hover_mark: str | None = None
    # The wire names the served case carries, a null one included, in its order: the
    # case page lists them as posted.
    carried: tuple[str, ...] = ()

    @property
    def bound(self) -> Bound:
        """What bounds it, as ``ingest.bounds`` words it."""
        return Bound(self.limiter, self.computeUtilPercent, self.hbmUtilPercent,
                     self.nvlinkUtilPercent, self.hotRankFactor)

    @property
    def measured(self) -> Measured:
        """What attribution reads of it (its phases and GPU state)."""
        return Measured(self.phaseMS, self.gpuState)

    def dimensions(self) -> dict[str, str | int | float]:
        """Its id and configuration by wire name: what grouping names a group by."""
        return {"id": self.id, "mode": self.mode, "precision": self.precision,
                "pipeline": self.pipeline, "category": self.category, "ep": self.ep,
                "F": self.F, "imbalance": self.imbalance}

    @property
    def caveat_codes(self) -> frozenset[str]:
        return frozenset(c.code for c in self.caveats)

    def value(self, wire: str) -> Any:
        """The field of that wire name (``metrics.METRICS``' keys, a filter's field)."""
        return getattr(self, wire)

    def number(self, key: str) -> float | None:
        """The field of that wire name as a float where it is a number (bools are not),
        else None; a dotted key reads into a record (``gpuState.powerMaxW``)."""
        name, *inner = key.split(".")
        value: Any = getattr(self, name, None)
        for part in inner:
            value = value.get(part) if isinstance(value, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)


WIRE_NAMES = tuple(f.wire for f in FIELDS)
_KNOWN = frozenset(WIRE_NAMES) | {"caveats"}


def frozen(value: Any) -> Any:
    """``value`` with every dict a read-only view and every list a tuple, all the way down:
    what the cache hands out is shared by every request, so no caller may change it."""
    if isinstance(value, dict):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(frozen(v) for v in value)
    return value


def case_view(case: Mapping[str, Any]) -> CaseView:
    """The view of a case as the API serves it (``services.cases.case_out``)."""
    # Any: the served case's values are as ingest validated, derived and stored them, each
    # of its field's kind (its ``case_fields`` entry); the dataclass names what is read.
    values: dict[str, Any] = {name: frozen(case[name]) for name in WIRE_NAMES if name in case}
    return CaseView(
        **values,
        caveats=tuple(CaseCaveat(c["code"], c["message"]) for c in case.get("caveats", ())),
        extra=MappingProxyType({k: frozen(v) for k, v in case.items() if k not in _KNOWN}),
        carried=tuple(k for k in case if k != "caveats"))


def thawed(value: Any) -> Any:
    """``frozen`` undone: JSON's dicts and lists again."""
    if isinstance(value, Mapping):
        return {k: thawed(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thawed(v) for v in value]
    return value


def case_record(view: CaseView) -> dict[str, Any]:
    """The case back as served, in JSON's types and its order (the case page's list):
    each field it carries, known to this service or not."""
    return {name: thawed(view.extra[name] if name in view.extra else getattr(view, name))
            for name in view.carried}
