"""A bf16 GEMM ceiling measured on this device (CUDA events; wall clock on the CPU).

Prints one JSON line: {"device", "n", "bf16TFLOPs"}. The GPU check divides each case's
useful throughput by this measured ceiling, next to the datasheet peak.
"""

from __future__ import annotations

import json
import sys
import time

import torch


def ceiling(n: int, iterations: int) -> float:
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    if cuda:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            a @ b
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3
    else:
        t0 = time.perf_counter()
        for _ in range(iterations):
            a @ b
        seconds = time.perf_counter() - t0
    return 2 * n**3 * iterations / seconds / 1e12


def main() -> int:
    cuda = torch.cuda.is_available()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else (8192 if cuda else 512)
    name = torch.cuda.get_device_name() if cuda else "CPU"
    best = max(ceiling(n, 50 if cuda else 3) for _ in range(3))
    print(json.dumps({"device": name, "n": n, "bf16TFLOPs": best}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
