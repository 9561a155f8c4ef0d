"""The GPU's state while a case is timed: SM clock, power, temperature and NVML's
clocks-event (throttle) reasons, sampled by a thread over the timed windows only.

A ``Sampler`` is entered around each set of timed windows (``runner.timing``); entering
starts the sampling thread and exiting stops it, on every exit path (an OOM or any other
exception inside the windows). Without NVML (the CPU, no driver, no ``pynvml``) it
samples nothing and says why.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch

from ingest.derived import APPLICATIONS_CLOCKS, POWER_CAP, clock_event_names
from runner.platform import nvlink_counters, nvml_handle, open_nvml

INTERVAL_S = 0.02
NO_GPU = "no GPU: no NVML state to sample"


@dataclass(frozen=True)
class Sample:
    sm_mhz: float
    power_w: float
    temperature_c: float
    reasons: int


def read(nvml: Any, handle: Any) -> Sample:
    reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons)  # before NVML 12.2's rename
    return Sample(
        sm_mhz=float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        power_w=nvml.nvmlDeviceGetPowerUsage(handle) / 1e3,  # mW
        temperature_c=float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        reasons=int(reasons(handle)),
    )


def clocks_locked(nvml: Any, handle: Any) -> bool | None:
    """Whether the SM clock was set by hand: the applications clocks differ from their
    defaults (``nvidia-smi -ac``). None where NVML cannot say (not supported, no
    permission). Locked clocks (``nvidia-smi -lgc``) have no NVML getter; they show as
    the applications_clocks_setting clocks-event reason in the samples (``summary``)."""
    try:
        set_mhz = nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_SM)
        default_mhz = nvml.nvmlDeviceGetDefaultApplicationsClock(handle, nvml.NVML_CLOCK_SM)
    except Exception:  # noqa: BLE001 - NVML_ERROR_NOT_SUPPORTED and friends
        return None
    return bool(set_mhz != default_mhz)


def summary(samples: list[Sample], locked: bool | None = None) -> dict[str, Any]:
    """The wire format's ``gpuState`` of one rank's samples; ``locked``: ``clocks_locked``."""
    bits = 0
    for s in samples:
        bits |= s.reasons
    return {
        "smClockMinMHz": min(s.sm_mhz for s in samples),
        "smClockMedianMHz": float(statistics.median(s.sm_mhz for s in samples)),
        "smClockMaxMHz": max(s.sm_mhz for s in samples),
        "powerMaxW": max(s.power_w for s in samples),
        "temperatureMaxC": max(s.temperature_c for s in samples),
        "throttleReasons": bits,
        "throttleReasonNames": clock_event_names(bits),
        "powerCapped": bool(bits & POWER_CAP),
        "clocksLocked": True if bits & APPLICATIONS_CLOCKS else locked,
        "samples": len(samples),
    }


class Sampler:
    """Samples every INTERVAL_S while entered (and once on entry and exit, so even a
    short window has samples); ``state()`` reduces all samples taken so far."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.samples: list[Sample] = []
        self.reason: str | None = None if device.type == "cuda" else NO_GPU
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        self._handle: Any = None
        self.locked: bool | None = None  # clocks_locked, read on entry

    def __enter__(self) -> Sampler:
        if self.reason is not None:
            return self
        try:
            self._nvml = open_nvml()
            self._handle = nvml_handle(self._nvml, self.device)
            self.samples.append(read(self._nvml, self._handle))
            self.locked = clocks_locked(self._nvml, self._handle)
        except Exception as exc:  # noqa: BLE001 - no library, no driver, unsupported query
            self.reason = f"NVML unavailable ({type(exc).__name__}: {str(exc)[:200]})"
            self._close()
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="gpustate", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            try:
                self.samples.append(read(self._nvml, self._handle))
            except Exception:  # noqa: BLE001 - a failed read is a missing sample, no more
                pass

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            try:
                self.samples.append(read(self._nvml, self._handle))
            except Exception:  # noqa: BLE001 - see _loop
                pass
        self._close()

    def _close(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = self._handle = None

    def state(self) -> tuple[dict[str, Any] | None, str | None]:
        """(``gpuState``, None), or (None, why not)."""
        if self.samples:
            return summary(self.samples, self.locked), None
        return None, self.reason or "no timed window ran, so nothing was sampled"


NVLINK_SECONDS = 1.0


def nvlink_gbps(loop: Callable[[], None], step_ms: float, device: torch.device
                ) -> tuple[float | None, float | None]:
    """NVLink TX/RX GB/s over a loop of the step lasting at least NVLINK_SECONDS. The
    iteration count comes from the window median (the same on every rank), not from a
    clock, so the ranks' collectives stay matched."""
    if device.type != "cuda":
        return None, None
    before = nvlink_counters(device)
    if before is None:
        return None, None
    iterations = max(1, math.ceil(NVLINK_SECONDS * 1e3 / step_ms))
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(iterations):
        loop()
    torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    after = nvlink_counters(device)
    if after is None:
        return None, None
    return ((after[0] - before[0]) / elapsed / 1e9, (after[1] - before[1]) / elapsed / 1e9)
