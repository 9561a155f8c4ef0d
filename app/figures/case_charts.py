"""The charts of one case: its timing windows, rows received per rank, memory breakdown and
saved bytes per rank."""

from __future__ import annotations

from typing import Any

from app.case_view import CaseView
from app.figures.layout import chart_layout, figure, titled
from app.figures.style import GIB, Spec, Trace, precision_colour


def case_windows_spec(case: CaseView) -> Spec:
    """The timing windows (combined, forward, backward) of one case."""
    windows = case.windows or {}
    data = [{"type": "scatter", "mode": "lines+markers", "name": kind,
             "x": list(range(1, len(windows[kind]) + 1)), "y": windows[kind],
             "hovertemplate": f"{kind} window %{{x}}: %{{y:.4f}} ms<extra></extra>"}
            for kind in ("combined", "forward", "backward") if windows.get(kind)]
    # The axis fits the windows (not from 0): a few percent between windows is the point.
    return figure(data, chart_layout("Timing windows (per iteration)",
                                     "time (ms)", height=360,
                                     xaxis={"title": titled("window"), "dtick": 1},
                                     yaxis={"title": titled("time (ms)"),
                                            "rangemode": "normal"},
                                     legend={"title": titled("kind")}))


def _case_bar(case: CaseView, x: list[Any], y: list[Any], name: str, hover: str) -> Trace:
    return {"type": "bar", "x": x, "y": y, "name": name, "hovertemplate": hover,
            "marker": {"color": precision_colour(case.precision)}}


def case_receive_rows_spec(case: CaseView) -> Spec:
    rows = case.receiveRows
    bar = _case_bar(case, list(range(len(rows))), list(rows), "received rows",
                    "rank %{x}: %{y} rows<extra></extra>")
    return figure([bar], chart_layout("Rows received per rank", "rows", height=360,
                                      xaxis={"title": titled("rank")}))


_MEMORY_FIELDS = (
    ("slotBytes", "arena slot"), ("scratchBytes", "arena scratch"), ("arenaBytes", "arena"),
    ("inputBytes", "inputs"), ("hostScratchBytes", "host scratch"),
)


def case_memory_spec(case: CaseView) -> Spec:
    labels = [label for _, label in _MEMORY_FIELDS] + ["allocated peak", "reserved peak"]
    # A size the runner did not measure draws no bar, rather than one of 0 GiB.
    values = [None if (size := case.number(f)) is None else size / GIB
              for f, _ in _MEMORY_FIELDS] + [case.allocatedPeakGiB, case.reservedPeakGiB]
    bar = _case_bar(case, labels, values, "memory", "%{x}: %{y:.3f} GiB<extra></extra>")
    return figure([bar], chart_layout("Memory breakdown", "GiB", height=360,
                                      xaxis={"title": titled("accounting view")}))


def case_saved_bytes_spec(case: CaseView) -> Spec:
    saved = case.savedBytes
    bar = _case_bar(case, list(range(len(saved))), [s / GIB for s in saved], "saved bytes",
                    "rank %{x}: %{y:.3f} GiB<extra></extra>")
    title = "Saved activations per rank" + ("" if saved else " (none: inference)")
    return figure([bar], chart_layout(title, "saved GiB", height=360,
                                      xaxis={"title": titled("rank")}))


def case_phases_spec(case: CaseView) -> Spec:
    """The case's per-phase times beside its layer time, two views where the runner gave
    both: each phase inside the layer's own step (inLayerPhaseMS) and each timed alone
    (phaseMS, which need not add up to the layer: the case's phaseNote states the gap;
    alone minus inside is what the layer's overlap and ordering change); training's
    backward phases beside the layer's backward, inside the layer's backward too
    (inLayerBackwardPhaseMS) where the runner gave them."""
    phases = case.phaseMS or {}
    labels = [p for p in ("route", "quantize", "dispatch", "experts", "combine") if p in phases]
    x: list[str] = [*labels, "layer (forward)"]
    y: list[Any] = [*(phases[p] for p in labels), case.forwardMS]
    backward = case.backwardPhaseMS or {}
    if backward:
        names = [p for p in ("combine", "experts", "dispatch") if p in backward]
        x += [*(f"bwd {p}" for p in names), "layer (bwd)"]
        y += [*(backward[p] for p in names), case.backwardMS]
    inside = case.inLayerPhaseMS or {}
    bar = _case_bar(case, x, y, "each phase alone" if inside else "time",
                    "%{x}: %{y:.4f} ms<extra></extra>")
    if not inside:
        return figure([bar], chart_layout("Phases, each timed alone", "time (ms)",
                                          height=360, xaxis={"title": titled("phase")}))
    names = [p for p in ("dispatch", "experts", "combine") if p in inside]
    inside_back = case.inLayerBackwardPhaseMS or {}
    back_names = [p for p in ("combine", "experts", "dispatch") if p in inside_back]
    in_layer = {**_case_bar(case, [*names, *(f"bwd {p}" for p in back_names)],
                            [*(inside[p] for p in names), *(inside_back[p] for p in back_names)],
                            "inside the layer",
                            "%{x} inside the layer: %{y:.4f} ms<extra></extra>"),
                "marker": {"color": precision_colour(case.precision),
                           "pattern": {"shape": "/"}}}
    layout = chart_layout("Phases inside the layer and each alone", "time (ms)", height=360,
                          xaxis={"title": titled("phase")}, legend={"title": titled("view")})
    return figure([in_layer, bar], {**layout, "barmode": "group"})


def case_specs(case: CaseView) -> dict[str, Spec]:
    """The case's charts; saved activations only for training (inference saves none),
    phases only where the runner timed them (one bar of layer time says nothing)."""
    specs = {"windows": case_windows_spec(case), "receive-rows": case_receive_rows_spec(case),
             "memory": case_memory_spec(case)}
    if case.mode != "inference":
        specs["saved-bytes"] = case_saved_bytes_spec(case)
    if case.phaseMS:
        specs["phases"] = case_phases_spec(case)
    return specs
