"""Each case field declared once: its wire name, the ``cases`` column that holds it, the kind
of its values, its label, and what the service and the dashboard do with it.

The repository's filters, facets and sort keys, the API's filter parameters, the report
page's filters and case table, the HTML export and the figures' matching configurations
all read FIELDS; ``tests/test_case_fields.py`` checks that every column the model declares
for a case field is declared here and that a field added here reaches all of them. A field
the runner adds that is only shown needs one line here (no column); to filter or sort on
it, give it a ``column`` (a ``CaseRow`` attribute and an Alembic migration).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ingest.limiters import LIMITERS


@dataclass(frozen=True)
class CaseField:
    wire: str  # its name in a report, in the API and in the dashboard's URLs
    label: str  # how the dashboard's table names it
    kind: type  # of one value: str, int, float, bool; list or dict for arrays
    column: str | None = None  # the CaseRow attribute holding it; None: in the payload only
    filterable: bool = False  # a filter of the API and the report page, part of a configuration
    sortable: bool = False  # a sort key of the API
    derived: bool = False  # computed at ingest from the report's meta (ingest.derived)
    tabled: bool = False  # a column of the report page's case table, its CSV and the export
    choices: tuple[str, ...] = ()  # the only values a filter accepts, where the wire limits them


def _config(wire: str, label: str, kind: type, column: str, **more: Any) -> CaseField:
    return CaseField(wire, label, kind, column, filterable=True, sortable=True, tabled=True,
                     **more)


def _metric(wire: str, label: str, kind: type, column: str, **more: Any) -> CaseField:
    return CaseField(wire, label, kind, column, sortable=True, **more)


# In the order of the case table; the fields it does not show follow.
FIELDS: tuple[CaseField, ...] = (
    CaseField("id", "case", str, "case_id", sortable=True, tabled=True),
    _config("mode", "mode", str, "mode", choices=("inference", "training")),
    _config("ep", "EP", int, "ep"),
    _config("precision", "precision", str, "precision"),
    _config("pipeline", "pipeline", str, "pipeline"),
    _config("category", "category", str, "category"),
    _config("F", "F", int, "f"),
    _config("imbalance", "imbalance", float, "imbalance"),
    _metric("layerMS", "layer ms", float, "layer_ms", tabled=True),
    _metric("forwardMS", "forward ms", float, "forward_ms", tabled=True),
    _metric("backwardMS", "backward ms", float, "backward_ms", tabled=True),
    _metric("usefulTFPerGPU", "useful TFLOP/s", float, "useful_tf_per_gpu", tabled=True),
    _metric("percentOfPeak", "% of peak", float, "percent_of_peak", derived=True, tabled=True),
    _metric("percentOfMeasuredCeiling", "% of measured ceiling", float,
            "percent_of_measured_ceiling", derived=True, tabled=True),
    _metric("hbmPercentOfPeak", "HBM % of peak", float, "hbm_percent_of_peak", derived=True,
            tabled=True),
    _metric("nvlinkTXPercentOfPeak", "NVLink TX %", float, "nvlink_tx_percent_of_peak",
            derived=True, tabled=True),
    _metric("nvlinkRXPercentOfPeak", "NVLink RX %", float, "nvlink_rx_percent_of_peak",
            derived=True, tabled=True),
    _metric("windowSpreadPercent", "window spread %", float, "window_spread_percent",
            derived=True, tabled=True),
    _metric("observedImbalance", "observed imbalance", float, "observed_imbalance",
            derived=True, tabled=True),
    _metric("hotRankFactor", "busiest rank x mean rows", float, "hot_rank_factor",
            derived=True),
    _metric("computeUtilPercent", "compute util % (busiest rank)", float,
            "compute_util_percent", derived=True, tabled=True),
    _metric("hbmUtilPercent", "HBM util % (busiest rank)", float, "hbm_util_percent",
            derived=True, tabled=True),
    _metric("nvlinkUtilPercent", "NVLink util % (busiest rank)", float, "nvlink_util_percent",
            derived=True, tabled=True),
    # What bounds the case: filterable to find them, but not part of a configuration.
    CaseField("limiter", "limiter", str, "limiter", filterable=True, sortable=True,
              derived=True, tabled=True, choices=LIMITERS),
    _metric("imbalanceLossPercent", "% of time other ranks wait", float,
            "imbalance_loss_percent", derived=True),
    _metric("communicationSharePercent", "communication % of phases", float,
            "communication_share_percent", derived=True, tabled=True),
    _metric("allocatedPeakGiB", "allocated GiB", float, "allocated_peak_gib", tabled=True),
    _metric("reservedPeakGiB", "reserved GiB", float, "reserved_peak_gib", tabled=True),
    _metric("nvlinkTXGBps", "NVLink TX GB/s", float, "nvlink_tx_gbps"),
    _metric("nvlinkRXGBps", "NVLink RX GB/s", float, "nvlink_rx_gbps"),
    _metric("nvlinkMaxTXGBps", "NVLink max TX GB/s", float, "nvlink_max_tx_gbps"),
    _metric("nvlinkMaxRXGBps", "NVLink max RX GB/s", float, "nvlink_max_rx_gbps"),
    _metric("analyticalHBMGBps", "analytical HBM GB/s", float, "analytical_hbm_gbps"),
    _metric("slotBytes", "slot bytes", int, "slot_bytes"),
    _metric("scratchBytes", "scratch bytes", int, "scratch_bytes"),
    _metric("arenaBytes", "arena bytes", int, "arena_bytes"),
    _metric("inputBytes", "input bytes", int, "input_bytes"),
    _metric("capacityRows", "capacity rows", int, "capacity_rows"),
    _metric("logicalForwardPayloadBytesRank0", "logical forward payload bytes (rank 0)", int,
            "logical_forward_payload_bytes_rank0"),
    _metric("forwardFlopsPerLogicalPayloadByteRank0",
            "forward FLOP per logical payload byte (rank 0)", float,
            "forward_flops_per_logical_payload_byte_rank0"),
    CaseField("hostScratchBytes", "host scratch bytes", int, "host_scratch_bytes"),
    CaseField("emulated", "emulated", bool, "emulated"),
    CaseField("numericalAccepted", "numerics accepted", bool, "numerical_accepted"),
    CaseField("graphAccepted", "graphs accepted", bool, "graph_accepted"),
    CaseField("allocationRetries", "allocation retries", int, "allocation_retries"),
    CaseField("ooms", "OOMs", int, "ooms"),
    # Arrays: in the report's stored body only (nothing filters or sorts on them).
    CaseField("windows", "windows", dict),
    CaseField("receiveRows", "received rows per rank", list),
    CaseField("savedBytes", "saved bytes per rank", list),
    CaseField("recompute", "recompute per layer", list),
    # moescope's own runner adds these (other runners may not): shown, not columns.
    CaseField("phaseMS", "phase ms (dispatch, experts, combine)", dict),
    CaseField("phaseMeanMS", "phase ms, mean over ranks", dict),
    CaseField("backwardPhaseMS", "backward phase ms (combine, experts, dispatch)", dict),
    CaseField("backwardPhaseMeanMS", "backward phase ms, mean over ranks", dict),
    CaseField("phaseSumMS", "forward phases' sum ms", float),
    CaseField("phaseGapMS", "layer forward minus phases' sum, ms", float),
    CaseField("phaseGapPercent", "phase gap, % of the layer's forward", float),
    CaseField("backwardPhaseSumMS", "backward phases' sum ms", float),
    CaseField("backwardPhaseGapMS", "layer backward minus phases' sum, ms", float),
    CaseField("backwardPhaseGapPercent", "backward phase gap, % of the layer's backward",
              float),
    CaseField("phaseNote", "phases against the layer", str),
    CaseField("phaseGraphs", "phases replayed as CUDA graphs", bool),
    CaseField("phaseGraphNote", "why a phase ran eagerly", str),
    CaseField("dispatchGBps", "dispatch GB/s, busiest rank's remote max(TX, RX)", float),
    CaseField("combineGBps", "combine GB/s, busiest rank's remote max(TX, RX)", float),
    CaseField("dispatchLocalBytes", "dispatch bytes staying on each rank", list),
    CaseField("dispatchRemoteBytes", "dispatch bytes crossing to each rank", list),
    CaseField("combineLocalBytes", "combine bytes staying on each rank", list),
    CaseField("combineRemoteBytes", "combine bytes crossing to each rank", list),
    CaseField("dispatchSentRemoteBytes", "dispatch bytes each rank sends to the others", list),
    CaseField("combineSentRemoteBytes", "combine bytes each rank sends back to the others",
              list),
    CaseField("dispatchBusiestRank", "dispatch's busiest rank (remote max of TX, RX)", int),
    CaseField("combineBusiestRank", "combine's busiest rank (remote max of TX, RX)", int),
    CaseField("inLayerPhaseMS", "phase ms inside the layer's step", dict),
    CaseField("inLayerPhaseSumMS", "in-layer phases' sum ms", float),
    CaseField("inLayerPhaseGapMS", "layer forward minus in-layer phases' sum, ms", float),
    CaseField("inLayerPhaseNote", "how the in-layer phases were timed", str),
    CaseField("inLayerBackwardPhaseMS", "backward phase ms inside the layer's step", dict),
    CaseField("inLayerBackwardPhaseSumMS", "in-layer backward phases' sum ms", float),
    CaseField("inLayerBackwardPhaseGapMS",
              "layer backward minus in-layer backward phases' sum, ms", float),
    CaseField("dispatchMode", "dispatch (static or dynamic)", str),
    CaseField("dispatchDedup", "dispatch deduplicated per rank", bool),
    CaseField("gpuState", "GPU state over the timed windows", dict),
    CaseField("gpuStateReason", "why no GPU state", str),
    CaseField("failure", "what ended the case (not an OOM)", str),
    CaseField("expertKernel", "expert GEMM kernel", str),
    CaseField("fp8Scaling", "fp8 scaling recipe (blockwise, rowwise)", str),
    CaseField("iterationMS", "iteration ms percentiles (p50, p90, p99)", dict),
    CaseField("setupS", "set-up s (before the first timed window)", float),
    CaseField("wallS", "case wall s", float),
    CaseField("compileS", "torch.compile s (part of set-up)", float),
    CaseField("compiledGraphs", "graphs compiled (0: reused its shape's)", int),
)

FILTERABLE = tuple(f for f in FIELDS if f.filterable)
SORTABLE = tuple(f for f in FIELDS if f.sortable)
DERIVED = tuple(f for f in FIELDS if f.derived)
TABLED = tuple(f for f in FIELDS if f.tabled)
STORED = tuple(f for f in FIELDS if f.column is not None and not f.derived)  # as posted


class CaseFilter:
    """The cases to keep: for each filterable field the values to match, any of them; a
    field without values does not filter. ``CaseFilter(precision=["bf16"], ep=[8, 16])``;
    ``filters.ep`` reads one field's values."""

    __slots__ = ("_values",)

    def __init__(self, **values: Sequence[Any]) -> None:
        unknown = sorted(set(values) - {f.wire for f in FILTERABLE})
        if unknown:
            raise TypeError(f"not a filterable case field: {', '.join(unknown)}")
        self._values = {f.wire: list(values.get(f.wire, ())) for f in FILTERABLE}

    def __getattr__(self, name: str) -> list[Any]:
        # Only for names that are not attributes; "_values" itself is unset only while the
        # object is built (or copied), and looking it up here would recurse.
        values = None if name.startswith("_") else self._values.get(name)
        if values is None:
            raise AttributeError(name)
        return values

    def active(self) -> list[tuple[CaseField, list[Any]]]:
        """The fields that filter, each with its values, in FILTERABLE order."""
        return [(f, self._values[f.wire]) for f in FILTERABLE if self._values[f.wire]]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CaseFilter) and self._values == other._values

    def __repr__(self) -> str:
        chosen = ", ".join(f"{f.wire}={values!r}" for f, values in self.active())
        return f"CaseFilter({chosen})"
