"""The allocator's peak counters of a case, behind a small interface so that a CPU test
can substitute a stub and check when they are reset and read.

The order per case (``runner.execute``): ``reset`` (synchronize, free the cached blocks
of earlier cases, reset the peaks), build, warm up and time the layer, ``read`` the peaks,
and only then the reference check and the other passes: the peaks are the layer's, not
its yardstick's.
"""

from __future__ import annotations

from typing import Protocol

import torch

from runner.oom import free_memory


class MemoryStats(Protocol):
    def reset(self) -> None:
        """Start a case: nothing cached from earlier cases, peaks from zero."""

    def read(self, harness_bytes: int) -> tuple[float | None, float | None]:
        """(allocated, reserved) peak GiB since ``reset``, less the harness's own buffer
        (``harness_bytes``, allocated before the reset); None where there is no allocator."""

    def retries(self) -> int:
        """The allocator's retries so far (cudaMalloc failed, cache freed, tried again)."""


class CudaMemory:
    def __init__(self, device: torch.device) -> None:
        self.device = device

    def reset(self) -> None:
        torch.cuda.synchronize(self.device)
        free_memory()  # reserved memory must not carry over from earlier cases
        torch.cuda.reset_peak_memory_stats(self.device)

    def read(self, harness_bytes: int) -> tuple[float | None, float | None]:
        torch.cuda.synchronize(self.device)
        allocated = torch.cuda.max_memory_allocated(self.device) - harness_bytes
        reserved = torch.cuda.max_memory_reserved(self.device) - harness_bytes
        return allocated / 2**30, reserved / 2**30

    def retries(self) -> int:
        return int(torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0))


class NoMemory:
    """The CPU: no allocator peaks (the fields are null), no retries."""

    def reset(self) -> None:
        pass

    def read(self, harness_bytes: int) -> tuple[float | None, float | None]:
        return None, None

    def retries(self) -> int:
        return 0


def memory_stats(device: torch.device) -> MemoryStats:
    return CudaMemory(device) if device.type == "cuda" else NoMemory()
