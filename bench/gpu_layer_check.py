"""The layer alone on one rank, in a one-rank process group (NCCL on a GPU, gloo on the
CPU), so its collectives run: per pipeline, eager vs CUDA-graph time, the graph replay
against the eager output, staged against standard on the same inputs, the layer-only peak
memory of one forward pass, and how many experts got no rows. Mega is left to the GPU
check's last step (one torch.compile in the whole check).

Then one torch.profiler pass over one replay of the timed step per pipeline (CUDA kernels
on a GPU, the CPU's operators on the CPU): the kernels by time, whether CUTLASS grouped
GEMMs and NCCL kernels ran, the device-to-host copies inside the step (there must be
none), and the kernel time by kind (communication: the dispatch and combine; GEMMs: the
experts; the rest) against the layer's time. Written to PROFILE.json for the summary.

usage: python bench/gpu_layer_check.py T D E K F [PROFILE.json]
"""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from runner.experts import make_experts, quantize_experts
from runner.graphs import inference_steps
from runner.matrix import Timing
from runner.pipelines import REGISTRY, BuildContext
from runner.platform import detect
from runner.routing import build_plan, rank_routing
from runner.spec import CaseSpec, Shape
from runner.timing import L2Flush, time_windows

CASES = (("bf16", "standard"), ("bf16", "staged"), ("mxfp8", "staged"))
TOP_KERNELS = 12


def _kind(name: str) -> str:
    low = name.lower()
    if "nccl" in low or "all_to_all" in low or "alltoall" in low:
        return "communication"
    if any(k in low for k in ("gemm", "cutlass", "grouped_mm", "aten::mm", "aten::bmm",
                              "aten::_scaled_mm", "sm90_xmma", "sm100_xmma")):
        return "gemm"
    return "other"


def profile_step(step: Any, cuda: bool, layer_ms: float) -> dict[str, Any]:
    """One replay of ``step`` under torch.profiler: kernels (CPU: operators) by time."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        step()
        if cuda:
            torch.cuda.synchronize()
    rows = []
    for event in prof.key_averages():
        us = event.device_time_total if cuda else event.self_cpu_time_total
        if us > 0 and (cuda or event.key.startswith(("aten::", "c10d::", "gloo:"))):
            rows.append({"name": event.key, "us": float(us), "count": int(event.count)})
    rows.sort(key=lambda r: -r["us"])
    by_kind: dict[str, float] = {"communication": 0.0, "gemm": 0.0, "other": 0.0}
    for row in rows:
        if not row["name"].startswith("Memcpy"):
            by_kind[_kind(row["name"])] += row["us"] / 1e3
    names = [r["name"].lower() for r in rows]
    return {
        "activity": "cuda kernels" if cuda else "cpu operators",
        "kernels": rows[:TOP_KERNELS],
        "cutlassGrouped": sum(1 for n in names if "cutlass" in n and "group" in n),
        "nccl": sum(1 for n in names if "nccl" in n),
        "deviceToHost": sum(r["count"] for r in rows if "dtoh" in r["name"].lower()
                            or "device -> pageable" in r["name"].lower()),
        "kindMS": by_kind, "layerMS": layer_ms,
    }


def print_profile(label: str, prof: dict[str, Any]) -> None:
    print(f"   profile {label} ({prof['activity']}, one replay): " + "; ".join(
        f"{k} {v:.4f} ms" for k, v in prof["kindMS"].items())
        + f" against the layer's {prof['layerMS']:.4f} ms; CUTLASS grouped "
          f"{prof['cutlassGrouped']}, NCCL {prof['nccl']}, device-to-host copies "
          f"{prof['deviceToHost']}")
    for row in prof["kernels"]:
        print(f"     {row['us'] / 1e3:9.4f} ms x{row['count']:<3} {row['name'][:110]}")


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))


def main(t: int, d: int, e: int, k: int, f: int, profile_out: str | None = None) -> int:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    plat = detect(0)
    if plat.cuda:
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=plat.device)
    else:
        dist.init_process_group("gloo", rank=0, world_size=1)
    group, device = dist.group.WORLD, plat.device
    timing = (Timing(windows=3, iterations=10, warmup=3, warmup_ms=200) if plat.cuda else
              Timing(windows=1, iterations=1, warmup=0, warmup_ms=0))
    flush = L2Flush(device) if plat.cuda else None
    shape = Shape(T=t, D=d, E=e, K=k)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(t, d, generator=g).to(torch.bfloat16).to(device)
    experts = make_experts(d, f, 0, e, 0, torch.bfloat16, device)
    outputs: dict[tuple[str, str], torch.Tensor] = {}
    profiles: dict[str, dict[str, Any]] = {}
    print(f"== layer check T={t} D={d} E={e} K={k} F={f} on {plat.gpu_name}, "
          f"{dist.get_backend(group)} one-rank group")
    for precision, pipeline in CASES:
        spec = CaseSpec("inference", 1, precision, pipeline, "gpu_check", f, 1.0)
        plan = build_plan(shape, spec, 0)
        zero = sum(1 for n in rank_routing(plan, 0).expert_counts if n == 0)
        ctx = BuildContext(plan, 0, t, precision, group, device, plat.grouped_mm,
                           native_scaled=plat.native_scaled)
        forward = REGISTRY[pipeline].build(ctx)
        # as run_case builds a case: the weights quantized once, outside the timed steps
        layer_experts = quantize_experts(experts, precision,
                                         bool(plat.native_scaled.get(precision)))
        with torch.no_grad():
            eager_out = forward(x, layer_experts).clone()
            if plat.cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats(device)
                base = torch.cuda.memory_allocated(device)
                forward(x, layer_experts)
                torch.cuda.synchronize()
                layer_mib = f"{(torch.cuda.max_memory_allocated(device) - base) / 2**20:.1f}"
            else:
                layer_mib = "-"
            eager = time_windows(partial(forward, x, layer_experts), timing, device=device,
                                 group=group, flush=flush)
            steps = inference_steps(forward, layer_experts, x, plat.cuda, group)
            graph = time_windows(steps.step, timing, device=device, group=group, flush=flush)
        outputs[(precision, pipeline)] = eager_out
        versus = ""
        if precision == "bf16" and pipeline != "standard":
            versus = (f" vs standard rel {relative(eager_out, outputs[('bf16', 'standard')]):.2e}"
                      f" equal {bool(torch.equal(eager_out, outputs[('bf16', 'standard')]))}")
        note = f" ({steps.note})" if steps.note else ""
        print(f"{precision:>6} {pipeline:<8} zero-row experts {zero}/{e}  eager "
              f"{eager.median_ms:.3f} ms  graph {graph.median_ms:.3f} ms  graph replay "
              f"matches eager (<= 1e-3): {steps.accepted}{note}  layer-only peak "
              f"{layer_mib} MiB{versus}", flush=True)
        with torch.no_grad():
            label = f"{precision} {pipeline}"
            profiles[label] = profile_step(steps.step, plat.cuda, graph.median_ms)
        print_profile(label, profiles[label])
        del steps, forward
    dist.destroy_process_group()
    if profile_out:
        Path(profile_out).write_text(json.dumps({"cuda": plat.cuda, "pipelines": profiles}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:6]), *sys.argv[6:7]))
