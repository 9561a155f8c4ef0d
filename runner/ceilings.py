"""Ceilings measured on this run's own GPUs before the cases (``meta.measuredCeilings``),
so a case's throughput can be read against what this hardware reaches, not only against
the datasheet:

- dense GEMM: an n x n x n GEMM per native precision (bf16 always; mxfp8 / nvfp4 where
  the start-up probe ran the native scaled GEMM; an emulated precision is named in
  ``unmeasured`` with why);
- grouped GEMM: the experts' three GEMMs (gate, up: rows x D x F; down: rows x F x D) of
  each case's local experts at the busiest rank's rows, spread evenly, as the case's
  pipeline runs them (staged: in its token stages; experts without rows are empty
  groups; staged and mega: each expert's rows padded to 128), with the kernel the
  case's experts use (``torch._grouped_mm`` or the loop; native quantized:
  ``_scaled_mm`` per expert; emulated quantized: the bf16 GEMMs it emulates with).
  ``tf`` is the case's useful FLOPs (unpadded rows) over the time of those GEMMs: the
  most the case could reach if nothing but its GEMMs took time; ``gemmTF`` counts the
  padded rows too (the kernel's own rate);
- all-to-all of each EP group, as nccl-tests' alltoall_perf measures it: per message size
  (each rank's send buffer, S bytes, equal splits) algbw = S / time and busbw = algbw x
  (n - 1) / n, the bandwidth a link sees.

Each is timed with the layer's windows (``runner.timing``: warm-up, W windows of I
iterations, median of the windows; no L2 flush: a ceiling is the best case). GEMM
ceilings are per GPU (``*PerGPU``); the headline figure is the slowest GPU's, which a
layer whose ranks wait for each other cannot beat. On the CPU the same figures are
measured with the wall clock over gloo, and mean nothing for GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.distributed as dist

from runner.layer import GROUP_ROWS
from runner.matrix import Matrix, Timing
from runner.native import gemm, quantize_operand
from runner.oom import free_memory
from runner.pipelines import gemm_layout
from runner.platform import Platform
from runner.routing import build_plan
from runner.spec import CaseSpec
from runner.timing import time_windows

DENSE_N = {"cuda": 8192, "cpu": 256}
# Each rank's send buffer, as nccl-tests sweeps it (-b 1M -e 256M -f 4 on a GPU).
A2A_BYTES = {"cuda": [2**20 * 4**k for k in range(5)], "cpu": [2**16, 2**20]}


@dataclass(frozen=True)
class GroupedShape:
    precision: str
    experts: int  # local experts of a rank
    rows: int  # rows per expert: the busiest rank's, rounded up (the ceiling's key)
    D: int
    F: int
    pipeline: str
    busiest: int  # rows the busiest rank receives
    gemm_experts: int  # experts with rows in one grouped GEMM
    gemm_rows: int  # rows per such expert, as the pipeline runs them (padded)
    stages: int  # grouped GEMMs per layer pass

    @property
    def flops(self) -> int:
        """The useful FLOPs of the busiest rank's experts: its rows, unpadded."""
        return 6 * self.busiest * self.D * self.F

    @property
    def gemm_flops(self) -> int:
        """The FLOPs its GEMMs run, padding included."""
        return 6 * self.gemm_experts * self.gemm_rows * self.stages * self.D * self.F


def gemm_rows(busiest: int, experts: int, pipeline: str, tokens: int) -> tuple[int, int, int]:
    """(experts with rows, rows per such expert, GEMMs per pass) of a rank receiving
    ``busiest`` rows for ``experts`` experts, the rows spread evenly: over the pipeline's
    token stages, then over as many experts as a stage has rows for (an expert without
    rows is an empty group, no padding), each expert's padded to GROUP_ROWS where the
    pipeline pads."""
    padded, stages = gemm_layout(pipeline, tokens)
    per_stage = -(-busiest // stages)
    active = min(experts, per_stage)
    per_expert = -(-per_stage // active)
    return active, (-(-per_expert // GROUP_ROWS) * GROUP_ROWS if padded else per_expert), \
        stages


def grouped_shapes(matrix: Matrix, cases: list[CaseSpec]) -> list[GroupedShape]:
    """The distinct expert-GEMM shapes of ``cases``, in order (a shape with no rows has
    no throughput to measure)."""
    shapes: dict[GroupedShape, None] = {}
    for spec in cases:
        local = matrix.shape.E // spec.ep
        busiest = max(build_plan(matrix.shape, spec, matrix.seed).receive)
        if busiest:
            active, per_gemm, stages = gemm_rows(busiest, local, spec.pipeline,
                                                 matrix.shape.T)
            shapes[GroupedShape(spec.precision, local, -(-busiest // local), matrix.shape.D,
                                spec.F, spec.pipeline, busiest, active, per_gemm,
                                stages)] = None
    return list(shapes)


def _seconds(run: Callable[[], object], timing: Timing, device: torch.device) -> float:
    ms = time_windows(run, timing, device=device, group=None).median_ms
    return ms / 1e3


def _randn(*shape: int, device: torch.device) -> torch.Tensor:
    return torch.randn(*shape, device=device).to(torch.bfloat16)


def dense_tf(precision: str, n: int, timing: Timing, device: torch.device) -> float:
    a, b = _randn(n, n, device=device), _randn(n, n, device=device)
    if precision == "bf16":
        def run() -> object:
            return a @ b
    else:  # operands quantized once, outside the timed GEMM
        qa, qb = quantize_operand(a, precision), quantize_operand(b, precision)

        def run() -> object:
            return gemm(qa, qb, precision)
    return 2 * n**3 / _seconds(run, timing, device) / 1e12


def grouped_kernel(shape: GroupedShape, plat: Platform) -> tuple[str, bool]:
    """(the kernel a case of this shape runs its expert GEMMs with, emulated?)"""
    if shape.precision != "bf16" and plat.native_scaled.get(shape.precision):
        return "torch._scaled_mm per expert", False
    kernel = "torch._grouped_mm" if plat.grouped_mm else "torch.matmul per expert"
    return kernel, shape.precision != "bf16"


def grouped_seconds(shape: GroupedShape, kernel: str, timing: Timing, device: torch.device
                    ) -> float:
    """One grouped GEMM set (gate, up, down) of ``shape.gemm_experts`` experts at
    ``shape.gemm_rows`` rows each."""
    el, rows, d, f = shape.gemm_experts, shape.gemm_rows, shape.D, shape.F
    x = _randn(el * rows, d, device=device)
    h = _randn(el * rows, f, device=device)
    if kernel == "torch._scaled_mm per expert":
        p = shape.precision
        xs = [quantize_operand(x[e * rows:(e + 1) * rows], p) for e in range(el)]
        hs = [quantize_operand(h[e * rows:(e + 1) * rows], p) for e in range(el)]
        up = [quantize_operand(_randn(f, d, device=device), p) for _ in range(el)]
        down = [quantize_operand(_randn(d, f, device=device), p) for _ in range(el)]

        def run() -> object:
            for e in range(el):
                gemm(xs[e], up[e], p)
                gemm(xs[e], up[e], p)
                gemm(hs[e], down[e], p)
            return None
    else:
        w_up, w_down = _randn(el, d, f, device=device), _randn(el, f, d, device=device)
        offs = torch.arange(1, el + 1, device=device, dtype=torch.int32) * rows
        if kernel == "torch._grouped_mm":
            def run() -> object:
                torch._grouped_mm(x, w_up, offs=offs)
                torch._grouped_mm(x, w_up, offs=offs)
                return torch._grouped_mm(h, w_down, offs=offs)
        else:
            def run() -> object:
                for e in range(el):
                    xe, he = x[e * rows:(e + 1) * rows], h[e * rows:(e + 1) * rows]
                    xe @ w_up[e]
                    xe @ w_up[e]
                    he @ w_down[e]
                return None
    return _seconds(run, timing, device)


def all_to_all(ep: int, group: Any, timing: Timing, device: torch.device,
               sizes: list[int]) -> dict[str, Any]:
    """nccl-tests' alltoall over ``group`` (this rank one of its ``ep``): per size the
    time (the maximum over ranks per window, median of the windows), algbw and busbw."""
    out = []
    for size in sizes:
        elements = size // 2 // ep * ep  # bf16, equal splits
        send = _randn(elements, device=device)
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
    measured: dict[tuple[str, int, int, int, int], float | None] = {}
    for shape in grouped_shapes(matrix, cases):
        kernel, emulated = grouped_kernel(shape, plat)
        key = (kernel if not emulated else "bf16:" + kernel, shape.gemm_experts,
               shape.gemm_rows, shape.D, shape.F)
        if key not in measured:
            measured[key] = _tried(
                partial(grouped_seconds, shape, kernel, timing, plat.device),
                f"grouped {shape.precision} E{shape.gemm_experts} rows {shape.gemm_rows} "
                f"F{shape.F}", unmeasured)
        seconds = measured[key]
        tf = shape.flops / (shape.stages * seconds) / 1e12 if seconds else None
        if tf is not None and tf > 0 and math.isfinite(tf):
            grouped.append({"precision": shape.precision, "experts": shape.experts,
                            "rowsPerExpert": shape.rows, "D": shape.D, "F": shape.F,
                            "pipeline": shape.pipeline, "gemmExperts": shape.gemm_experts,
                            "gemmRowsPerExpert": shape.gemm_rows,
                            "stages": shape.stages, "tf": tf,
                            "gemmTF": tf * shape.gemm_flops / shape.flops,
                            "kernel": kernel, "emulated": emulated})
    return {"dense": dense, "grouped": grouped, "unmeasured": unmeasured,
            "denseN": DENSE_N[kind]}


def _grouped_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(entry[k] for k in ("precision", "experts", "rowsPerExpert", "D", "F",
                                    "pipeline"))


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
    busbw = "; ".join(f"EP {a['ep']} busbw up to {a['busbwGBps']:.4g} GB/s"
                      for a in ceilings["allToAll"]) or "no EP group had more than one rank"
    unmeasured = "".join(f" {p}: {why}." for p, why in ceilings["unmeasured"].items())
    return (f"measuredCeilings, measured before the cases on every GPU of the run ({how}) "
            f"with the layer's warm-up and windows, no L2 flush: dense {ceilings['denseN']}^3 "
            f"GEMM TFLOP/s ({dense}); the experts' GEMMs (gate, up, down) of each case's "
            f"local experts at the busiest rank's rows, spread evenly, as its pipeline runs "
            f"them (staged: per token stage; experts without rows are empty groups; staged, "
            f"mega: each expert's rows padded to 128: stages x gemmExperts x "
            f"gemmRowsPerExpert), with the case's kernel (an emulated precision: "
            f"the bf16 GEMMs it emulates with); tf = the useful (unpadded) FLOPs over their "
            f"time, gemmTF with the padding counted; the slowest GPU's figure is the "
            f"ceiling. percentOfMeasuredCeiling = usefulTFPerGPU over that grouped ceiling. "
            f"All-to-all as nccl-tests measures it: algbw = each rank's "
            f"buffer / time, busbw = algbw x (n-1)/n, over sizes ({busbw}).{unmeasured}")
