"""What the machine is: device, probes, datasheet peaks, host info, NVLink counters."""

from __future__ import annotations

import os
import platform
import re
import socket
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from runner.fp8_probe import Fp8Probe, probe_fp8
from runner.grouped_probe import grouped_mm_probe
from runner.native import scaled_gemm
from runner.quant import fake_quantize


@dataclass(frozen=True)
class DatasheetPeaks:
    """Dense theoretical peaks per GPU from NVIDIA datasheets (not measured)."""

    tf: dict[str, float]
    hbm_gbps: float
    nvlink_gbps_per_direction: float | None
    # A precision the part has no peak for, and why (it runs emulated there).
    absent: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class KnownGpu:
    """A datasheet's GPU: its model word, and the words a device name must also hold when
    the model comes in variants with other peaks (A100 40GB has less HBM bandwidth)."""

    model: str
    peaks: DatasheetPeaks
    requires: frozenset[str] = frozenset()


# Hopper's tensor cores take FP8 (e4m3/e5m2) with scales applied outside the MMA, not the
# MX block formats: its 1979 TFLOP/s dense FP8 figure is fp8's peak, not mxfp8's.
HOPPER_ABSENT = {
    "mxfp8": "Hopper has no MX formats (FP8 with per-tensor scales only): mxfp8 runs "
             "emulated here, so it has no datasheet peak",
    "nvfp4": "Hopper has no FP4 tensor cores: nvfp4 runs emulated here, so it has no "
             "datasheet peak",
}
AMPERE_ABSENT = {
    "fp8": "Ampere has no FP8 tensor cores: fp8 runs emulated here, no datasheet peak",
    "mxfp8": "Ampere has no FP8 tensor cores: mxfp8 runs emulated here, no datasheet peak",
    "nvfp4": "Ampere has no FP4 tensor cores: nvfp4 runs emulated here, no datasheet peak",
}


# SXM parts. A device name matches on its whole words, never a substring: "GH200" is not
# an H200, and a name with a form-factor word (PCIe, NVL) is another part with other peaks
# (lower clocks and power, other HBM and NVLink), so it gets none rather than the SXM's.
KNOWN_GPUS: list[KnownGpu] = [
    KnownGpu("GB300", DatasheetPeaks({"bf16": 2500, "fp8": 5000, "mxfp8": 5000,
                                          "nvfp4": 15000}, 8000, 900)),
    KnownGpu("B300", DatasheetPeaks({"bf16": 2250, "fp8": 4500, "mxfp8": 4500,
                                         "nvfp4": 13500}, 8000, 900)),
    KnownGpu("GB200", DatasheetPeaks({"bf16": 2500, "fp8": 5000, "mxfp8": 5000,
                                          "nvfp4": 10000}, 8000, 900)),
    KnownGpu("B200", DatasheetPeaks({"bf16": 2250, "fp8": 4500, "mxfp8": 4500,
                                         "nvfp4": 9000}, 8000, 900)),
    KnownGpu("H200", DatasheetPeaks({"bf16": 989, "fp8": 1979}, 4800, 450, HOPPER_ABSENT)),
    KnownGpu("H100", DatasheetPeaks({"bf16": 989, "fp8": 1979}, 3350, 450, HOPPER_ABSENT)),
    KnownGpu("A100", DatasheetPeaks({"bf16": 312}, 2039, 300, AMPERE_ABSENT),
             frozenset({"SXM4", "80GB"})),
]
OTHER_FORM_FACTORS = frozenset({"PCIE", "NVL"})


def datasheet_peaks(gpu_name: str) -> DatasheetPeaks | None:
    words = [w.upper() for w in re.split(r"[\s\-_/]+", gpu_name) if w]
    if words[:1] == ["NVIDIA"]:
        words = words[1:]
    if not words or OTHER_FORM_FACTORS & set(words):
        return None
    for gpu in KNOWN_GPUS:
        if words[0] == gpu.model and {r.upper() for r in gpu.requires} <= set(words):
            return gpu.peaks
    return None


@dataclass
class Platform:
    device: torch.device
    backend: str
    gpu_name: str
    grouped_mm: bool
    native_scaled: dict[str, bool] = field(default_factory=dict)
    grouped_mm_reason: str | None = None  # why the experts loop, when grouped_mm is False
    fp8: Fp8Probe | None = None  # how native fp8 runs here (runner.fp8_probe)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"


def detect(local_rank: int) -> Platform:
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        name, backend = torch.cuda.get_device_name(device), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
        name = f"CPU ({platform.processor() or platform.machine()})"
    grouped = grouped_mm_probe(device)
    fp8 = probe_fp8(device)
    native = {p: native_scaled_mm_runs(p, device) for p in ("mxfp8", "nvfp4")}
    return Platform(device, backend, name, grouped.runs, {**native, "fp8": fp8.native},
                    grouped.reason, fp8)


def native_scaled_mm_runs(precision: str, device: torch.device) -> bool:
    """Probe the runner's own native block-scaled GEMM (runner.native.scaled_gemm) on a
    tiny problem: it must run and agree with the emulated GEMM of the same quantized
    operands (so a wrong scale layout falls back to emulation rather than wrong numbers)."""
    if device.type != "cuda":
        return False
    try:
        g = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(128, 256, generator=g, device=device).to(torch.bfloat16)
        w = torch.randn(256, 128, generator=g, device=device).to(torch.bfloat16)
        got = scaled_gemm(x, w, precision).float()
        wq = fake_quantize(w.t().contiguous(), precision).t()
        want = fake_quantize(x, precision).float() @ wq.float()
        torch.cuda.synchronize(device)
        return bool(((got - want).norm() / want.norm()) < 1e-2)
    except (RuntimeError, TypeError, AttributeError, NotImplementedError, ValueError):
        return False


NODE_ENV = "MOESCOPE_NODE"


def node_name() -> str:
    """This rank's node: ``MOESCOPE_NODE`` where set (launches sharing one hostname, as in
    the multi-node test), else the hostname."""
    return os.environ.get(NODE_ENV) or socket.gethostname()


def host_info(plat: Platform, world: int, rank_nodes: list[str] | None = None
              ) -> dict[str, Any]:
    """``rank_nodes``: each rank's node name, in rank order (one node when not given)."""
    nodes = list(dict.fromkeys(rank_nodes or [node_name()]))
    info: dict[str, Any] = {
        "hostname": nodes[0],
        "nodes": nodes,
        "rankNodes": rank_nodes or [nodes[0]] * world,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "backend": plat.backend,
        "worldSize": world,
        "gpuCount": torch.cuda.device_count() if plat.cuda else 0,
        "driver": None,
        "nccl": None,
        "groupedMM": plat.grouped_mm,
        "groupedMMReason": plat.grouped_mm_reason,
        "nativeScaledGEMM": plat.native_scaled,
        "fp8Native": None if plat.fp8 is None else {
            "scaling": plat.fp8.scaling, "grouped": plat.fp8.grouped, "reason": plat.fp8.reason},
    }
    if plat.cuda:
        try:
            info["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
        except (RuntimeError, AttributeError):
            pass
        info["driver"] = nvml_driver_version()
    return info


# nvml.h: the NVLink throughput fields count one link, chosen by the field's scopeId (0 when
# pynvml is given a bare field id); "A scopeId of UINT_MAX returns aggregate value summed up
# across all links".
NVML_ALL_LINKS = 0xFFFFFFFF


def open_nvml() -> Any:
    """pynvml, initialised; pair each call with an ``nvmlShutdown`` (NVML counts its
    initialisations). Raises without the library or a driver."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _nvml() -> Any | None:
    """``open_nvml()``, or None without the library or a driver."""
    try:
        return open_nvml()
    except Exception:  # noqa: BLE001 - absent library or no driver: no NVML
        return None


def nvml_handle(nvml: Any, device: torch.device) -> Any:
    """This CUDA device's NVML handle, found by UUID: NVML numbers all GPUs of the node in
    PCI order, CUDA only the visible ones (CUDA_VISIBLE_DEVICES, as Slurm sets it)."""
    uuid = str(torch.cuda.get_device_properties(device).uuid)
    return nvml.nvmlDeviceGetHandleByUUID(
        uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}")


def nvml_driver_version() -> str | None:
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        version = nvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    finally:
        nvml.nvmlShutdown()


class NvlinkCounters(NamedTuple):
    tx: int  # bytes so far, over all links
    rx: int
    fields: str  # which NVML fields gave them


# (name, TX field, RX field, bytes per unit), in the order tried: the throughput fields
# (KiB), then the NVLink byte counters, which newer GPUs and drivers give where they no
# longer support the throughput fields (both summed over links with scopeId UINT_MAX).
NVLINK_FIELDS = (
    ("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX", "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX",
     "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", 1024),
    ("NVML_FI_DEV_NVLINK_COUNT_XMIT/RCV_BYTES", "NVML_FI_DEV_NVLINK_COUNT_XMIT_BYTES",
     "NVML_FI_DEV_NVLINK_COUNT_RCV_BYTES", 1),
)


def nvlink_counters(device: torch.device) -> NvlinkCounters | None:
    """TX and RX NVLink data bytes so far over all links of this CUDA device, and which
    fields gave them; None without NVML or NVLink (no field set supported)."""
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        handle = nvml_handle(nvml, device)
        for name, tx_field, rx_field, unit in NVLINK_FIELDS:
            if not hasattr(nvml, tx_field):  # a pynvml older than the field
                continue
            fields = [(getattr(nvml, tx_field), NVML_ALL_LINKS),
                      (getattr(nvml, rx_field), NVML_ALL_LINKS)]
            values = nvml.nvmlDeviceGetFieldValues(handle, fields)
            if all(v.nvmlReturn == 0 for v in values):
                # Running totals: the NVLink loop takes the difference over its duration.
                return NvlinkCounters(int(values[0].value.ullVal) * unit,
                                      int(values[1].value.ullVal) * unit, name)
        return None
    except Exception:  # noqa: BLE001 - no such GPU for NVML, or a driver error
        return None
    finally:
        nvml.nvmlShutdown()


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))


def now() -> float:
    return time.monotonic()
