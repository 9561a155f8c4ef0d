"""Ceilings measured on this run's own GPUs before the cases (``meta.measuredCeilings``),
so a case's throughput can be read against what this hardware reaches, not only against
the datasheet:

- dense GEMM: an n x n x n GEMM per native precision (bf16 always; mxfp8 / nvfp4 where
  the start-up probe ran the native scaled GEMM; an emulated precision is named in
  ``unmeasured`` with why);
- grouped GEMM: the experts' three GEMMs (gate, up: rows x D x F, each with its own
  weight; down: rows x F x D) of each case's local experts at the busiest rank's rows,
  spread evenly, as the case's pipeline runs them (training: forward and backward, the
  input and weight gradients of each, through autograd as the layer runs them; staged:
  in its token stages; experts without rows are empty groups; staged and mega: each
  expert's rows padded to 128), with the kernel the
  case's experts use (``torch._grouped_mm`` or the loop; native quantized:
  ``_scaled_mm`` per expert, fp8 rowwise one ``_scaled_grouped_mm``, fp8 training's
  backward GEMMs scaled too; emulated quantized: the bf16 GEMMs it emulates with).
  ``tf`` is the busiest rank's useful FLOPs (unpadded rows; training x 3) over the time
  of those GEMMs: the most its rate could reach if nothing but its GEMMs took time, so
  ``percentOfMeasuredCeiling`` (ingest.derived: the mean rank's rate x hotRankFactor over
  ``tf``) compares like with like; ``gemmTF`` counts the padded rows too (the kernel's
  own rate). An emulated precision's entry is the bf16 GEMMs it emulates with, marked
  ``emulated`` (the service gives such a case no % of ceiling);
- all-to-all of each EP group of more than one rank, as nccl-tests' alltoall_perf
  measures it, at the message sizes its cases send (``message_bytes``: each rank's send
  buffer of one dispatch and one combine, equal splits): algbw = S / time and busbw =
  algbw x (n - 1) / n, the bandwidth a link sees.

Each is timed with the layer's windows (``runner.timing``: warm-up, W windows of I
iterations, median of the windows; no L2 flush: a ceiling is the best case). GEMM
ceilings are per GPU (``*PerGPU``); the headline figure is the slowest GPU's, which a
layer whose ranks wait for each other cannot beat. On the CPU the same figures are
measured with the wall clock over gloo, and mean nothing for GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.distributed as dist

from runner.gemm_ceilings import (
    DENSE_N,
    dense_tf,
    grouped_kernel,
    grouped_seconds,
    grouped_shapes,
    randn,
)
from runner.matrix import Matrix, Timing
from runner.oom import free_memory
from runner.pipelines import gemm_layout
from runner.platform import Platform
from runner.quant import wire_width
from runner.spec import CaseSpec, Shape
from runner.timing import time_windows


def message_bytes(shape: Shape, spec: CaseSpec) -> list[int]:
    """Each rank's send buffer in one of the case's collectives: a stage's T K / stages
    rows, of the dispatch's wire row (quantized where the pipeline quantizes it) and of
    the combine's bf16 row."""
    rows = shape.T // gemm_layout(spec.pipeline, shape.T)[1] * shape.K
    bf16 = rows * 2 * shape.D
    if spec.quantized and spec.pipeline != "standard":
        return [rows * wire_width(spec.precision, shape.D), bf16]
    return [bf16]


def a2a_sizes(shape: Shape, cases: list[CaseSpec], ep: int) -> list[int]:
    """The distinct message sizes of the cases at ``ep``, smallest first."""
    return sorted({b for spec in cases if spec.ep == ep for b in message_bytes(shape, spec)})


def all_to_all(ep: int, group: Any, timing: Timing, device: torch.device,
               sizes: list[int]) -> dict[str, Any]:
    """nccl-tests' alltoall over ``group`` (this rank one of its ``ep``): per size the
    time (the maximum over ranks per window, median of the windows), algbw and busbw."""
    out = []
    for size in sizes:
        elements = size // 2 // ep * ep  # bf16, equal splits
        send = randn(elements, device=device)
        run = partial(dist.all_to_all_single, torch.empty_like(send), send, group=group)
        ms = time_windows(run, timing, device=device, group=group).median_ms
        nbytes = elements * 2
        algbw = nbytes / (ms * 1e-3) / 1e9
        out.append({"bytes": nbytes, "ms": ms, "algbwGBps": algbw,
                    "busbwGBps": algbw * (ep - 1) / ep})
    return {"ep": ep, "sizes": out, "busbwGBps": max(s["busbwGBps"] for s in out)}


def _tried(measure: Callable[[], float], what: str, unmeasured: dict[str, str]
           ) -> float | None:
    """A ceiling, or None with why in ``unmeasured`` (a kernel rejecting the shape, no
    memory for it): the run goes on without that ceiling."""
    try:
        return measure()
    except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
        if isinstance(exc, torch.OutOfMemoryError):
            free_memory()
        unmeasured[what] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        return None


def measure_gpu(plat: Platform, matrix: Matrix, cases: list[CaseSpec]) -> dict[str, Any]:
    """This rank's GPU: dense and grouped GEMM ceilings (TFLOP/s), plain data. Nothing here
    is a collective, so one GPU failing a measurement leaves the others in step."""
    kind = "cuda" if plat.cuda else "cpu"
    timing = matrix.timing
    dense: dict[str, float] = {}
    unmeasured: dict[str, str] = {}
    for precision in dict.fromkeys(["bf16", *(c.precision for c in cases)]):
        if precision == "bf16" or plat.native_scaled.get(precision):
            tf = _tried(partial(dense_tf, precision, DENSE_N[kind], timing, plat.device),
                        f"dense {precision}", unmeasured)
            if tf is not None:
                dense[precision] = tf
        else:
            unmeasured[precision] = (
                f"no native {precision} GEMM ran here (start-up probe): the precision is "
                f"emulated with bf16 GEMMs, so it has no ceiling of its own")
    grouped = []
    # Seconds of one GEMM set per kernel and GEMM shape (emulated: bf16's)
    measured: dict[tuple[str, int, int, int, int, bool], float | None] = {}
    for shape in grouped_shapes(matrix, cases):
        kernel, emulated = grouped_kernel(shape, plat)
        key = (kernel if not emulated else "bf16:" + kernel, shape.gemm_experts,
               shape.gemm_rows, shape.D, shape.F, shape.training)
        if key not in measured:
            measured[key] = _tried(
                partial(grouped_seconds, shape, kernel, timing, plat.device),
                f"grouped {shape.precision} E{shape.gemm_experts} rows {shape.gemm_rows} "
                f"F{shape.F}{' training' if shape.training else ''}", unmeasured)
        seconds = measured[key]
        tf = shape.flops / (shape.stages * seconds) / 1e12 if seconds else None
        if tf is not None and tf > 0 and math.isfinite(tf):
            grouped.append({"precision": shape.precision, "experts": shape.experts,
                            "rowsPerExpert": shape.rows, "D": shape.D, "F": shape.F,
                            "pipeline": shape.pipeline,
                            "mode": "training" if shape.training else "inference",
                            "gemmExperts": shape.gemm_experts,
                            "gemmRowsPerExpert": shape.gemm_rows,
                            "stages": shape.stages, "tf": tf,
                            "gemmTF": tf * shape.gemm_flops / shape.flops,
                            "kernel": kernel, "emulated": emulated})
    return {"dense": dense, "grouped": grouped, "unmeasured": unmeasured,
            "denseN": DENSE_N[kind]}


def _grouped_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(entry.get(k) for k in ("precision", "experts", "rowsPerExpert", "D", "F",
                                        "pipeline", "mode"))


def merge(per_gpu: list[dict[str, Any]], all_to_alls: list[dict[str, Any]]
          ) -> dict[str, Any]:
    """``meta.measuredCeilings`` from every rank's ``measure_gpu`` (in rank order) and the
    EP groups' all-to-alls: per GPU values, and the slowest GPU's as the ceiling (over the
    GPUs that measured it; one that could not says why in ``unmeasured``)."""
    dense_per: dict[str, list[float]] = {}
    grouped: dict[tuple[Any, ...], dict[str, Any]] = {}
    reasons: dict[str, dict[int, str]] = {}
    for rank, gpu in enumerate(per_gpu):
        for precision, tf in gpu["dense"].items():
            dense_per.setdefault(precision, []).append(tf)
        for entry in gpu["grouped"]:
            kept = grouped.setdefault(_grouped_key(entry), {**entry, "tfPerGPU": []})
            kept["tfPerGPU"].append(entry["tf"])
        for what, why in gpu["unmeasured"].items():
            reasons.setdefault(what, {})[rank] = why
    unmeasured = {  # one reason where every GPU gave it, else each rank's
        what: next(iter(by_rank.values()))
        if len(by_rank) == len(per_gpu) and len(set(by_rank.values())) == 1
        else "; ".join(f"rank {r}: {why}" for r, why in by_rank.items())
        for what, by_rank in reasons.items()}
    return {
        "denseTF": {p: min(v) for p, v in dense_per.items()},
        "denseTFPerGPU": dense_per,
        "denseN": per_gpu[0]["denseN"],
        "grouped": [{**g, "tf": min(g["tfPerGPU"]),
                     "gemmTF": min(g["tfPerGPU"]) * g["gemmTF"] / g["tf"]}
                    for g in grouped.values()],
        "allToAll": all_to_alls,
        "unmeasured": unmeasured,
    }


def ceiling_note(cuda: bool, ceilings: dict[str, Any] | None) -> str:
    if ceilings is None:
        return "No ceilings were measured: % of measured ceiling is not given."
    how = ("CUDA events" if cuda else
           "CPU run: the wall clock over gloo; these ceilings mean nothing for GPUs")
    dense = ", ".join(f"{p} {v:.4g}" for p, v in ceilings["denseTF"].items())
    busbw = "; ".join(
        f"EP {a['ep']}: " + ", ".join(f"{s['bytes']} B {s['busbwGBps']:.4g} GB/s"
                                      for s in a["sizes"])
        for a in ceilings["allToAll"]) or "no EP group had more than one rank"
    unmeasured = "".join(f" {p}: {why}." for p, why in ceilings["unmeasured"].items())
    return (f"measuredCeilings, measured before the cases on every GPU of the run ({how}) "
            f"with the layer's warm-up and windows, no L2 flush: dense {ceilings['denseN']}^3 "
            f"GEMM TFLOP/s ({dense}); the experts' GEMMs (gate, up, down) of each case's "
            f"local experts at the busiest rank's rows, spread evenly, as its pipeline runs "
            f"them (staged: per token stage; experts without rows are empty groups; staged, "
            f"mega: each expert's rows padded to 128: stages x gemmExperts x "
            f"gemmRowsPerExpert; gate and up each with its own weight; training: forward and "
            f"backward, mode), with the case's kernel (an emulated precision: "
            f"the bf16 GEMMs it emulates with, marked emulated); tf = the busiest rank's "
            f"useful (unpadded) FLOPs over their time, gemmTF with the padding counted; the "
            f"slowest GPU's figure is the ceiling. percentOfMeasuredCeiling = the busiest "
            f"rank's useful FLOP rate (usefulTFPerGPU x hotRankFactor) over the ceiling at "
            f"its shapes, none for an emulated precision. All-to-all as nccl-tests measures "
            f"it, at each EP group's case message sizes (each rank's send buffer of one "
            f"dispatch or combine): algbw = buffer / time, busbw = algbw x (n-1)/n "
            f"({busbw}).{unmeasured}")
