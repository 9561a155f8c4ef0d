"""NVLink counters through NVML: which GPU and which links the runner asks for.

No GPU or NVML here: ``pynvml`` is replaced by a stand-in that answers like NVML does
(nvml.h: the throughput fields count the link named by ``scopeId``, all links summed for
``UINT_MAX``; KiB), and the CUDA device's UUID is given, so the test checks the request
the runner makes, and that every ``nvmlInit`` is paired with an ``nvmlShutdown``."""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from runner import gpustate, platform

TX, RX = 138, 139
XMIT_BYTES, RCV_BYTES = 202, 204
NOT_SUPPORTED = 3  # nvml.h NVML_ERROR_NOT_SUPPORTED
UUID = "8a6b3f1e-0c2d-4e5f-9a8b-7c6d5e4f3a2b"
LINKS = 18


class FakeNvml:
    """Two GPUs in NVML's order; ours is the second (as with CUDA_VISIBLE_DEVICES=1)."""

    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = TX
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = RX
    NVML_FI_DEV_NVLINK_COUNT_XMIT_BYTES = XMIT_BYTES
    NVML_FI_DEV_NVLINK_COUNT_RCV_BYTES = RCV_BYTES

    def __init__(self) -> None:
        self.initialised = 0
        self.throughput_supported = True  # newer GPUs and drivers: byte counters only
        self.handles = {"GPU-other": "handle-0", f"GPU-{UUID}": "handle-1"}

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self.initialised += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.initialised -= 1

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:  # noqa: N802
        return self.handles[uuid]

    # GPU state: each read of our GPU steps through CLOCKS; the other GPU is idle.
    NVML_CLOCK_SM, NVML_TEMPERATURE_GPU = 1, 0
    reads = 0

    def nvmlDeviceGetClockInfo(self, handle: str, kind: int) -> int:  # noqa: N802
        assert (handle, kind) == ("handle-1", 1)
        self.reads += 1
        return CLOCKS[self.reads % len(CLOCKS)]

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:  # noqa: N802
        return 650_000 + 1000 * self.reads  # mW

    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:  # noqa: N802
        return 60 + self.reads % 5

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:  # noqa: N802
        return 0x4 if self.reads == 2 else 0x1  # one sample power-capped

    # Applications clocks: set (nvidia-smi -ac) when they differ from the default; None:
    # the query is not supported (NVML raises).
    applications_mhz: int | None = 1980

    def nvmlDeviceGetApplicationsClock(self, handle: str, kind: int) -> int:  # noqa: N802
        assert (handle, kind) == ("handle-1", 1)
        if self.applications_mhz is None:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return self.applications_mhz

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: str, kind: int) -> int:  # noqa: N802
        return 1980

    def nvmlDeviceGetFieldValues(self, handle: str, fields: list[Any]) -> list[Any]:  # noqa: N802
        per_link_kib = {"handle-0": 7, "handle-1": 100}[handle]
        values = []
        for field in fields:
            field_id, scope = field if isinstance(field, tuple) else (field, 0)
            kib = per_link_kib * (LINKS if scope == 0xFFFFFFFF else 1)
            kib *= 2 if field_id in (RX, RCV_BYTES) else 1
            status = 0
            if field_id in (TX, RX):
                status = 0 if self.throughput_supported else NOT_SUPPORTED
            value = kib if field_id in (TX, RX) else kib * 1024  # the counters count bytes
            values.append(SimpleNamespace(nvmlReturn=status,
                                          value=SimpleNamespace(ullVal=value)))
        return values


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device: SimpleNamespace(uuid=UUID))
    return fake


def test_counters_sum_every_link_of_this_cuda_device(nvml: FakeNvml) -> None:
    counters = platform.nvlink_counters(torch.device("cuda", 0))
    assert counters is not None
    assert (counters.tx, counters.rx) == (100 * LINKS * 1024, 200 * LINKS * 1024)
    assert counters.fields == "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX"
    assert nvml.initialised == 0


def test_byte_counters_where_the_throughput_fields_are_unsupported(nvml: FakeNvml) -> None:
    nvml.throughput_supported = False
    counters = platform.nvlink_counters(torch.device("cuda", 0))
    assert counters is not None
    assert (counters.tx, counters.rx) == (100 * LINKS * 1024, 200 * LINKS * 1024)
    assert counters.fields == "NVML_FI_DEV_NVLINK_COUNT_XMIT/RCV_BYTES"
    assert nvml.initialised == 0


def test_driver_version_shuts_nvml_down(nvml: FakeNvml) -> None:
    nvml.nvmlSystemGetDriverVersion = lambda: b"570.1"  # type: ignore[attr-defined]
    assert platform.nvml_driver_version() == "570.1"
    assert nvml.initialised == 0


@pytest.mark.parametrize(("cuda", "fields", "says"), [
    (True, "NVML_FI_DEV_NVLINK_COUNT_XMIT/RCV_BYTES",
     "NVLink TX/RX are NVML data counters (NVML_FI_DEV_NVLINK_COUNT_XMIT/RCV_BYTES)"),
    (True, None, "no NVML NVLink counters on this GPU"),
    (False, None, "no GPU, no NVML"),
])
def test_the_bandwidth_note_says_whether_nvlink_was_read_and_how(
        cuda: bool, fields: str | None, says: str) -> None:
    from runner.matrix import parse_matrix
    from runner.report import PlatformFacts, build_meta

    matrix = parse_matrix({"shape": {"T": 8, "D": 32, "E": 2, "K": 1}, "matrix": {
        "mode": "inference", "ep": 1, "precision": "bf16", "pipeline": "standard", "F": 32,
        "imbalance": 1, "category": "c"}})
    facts = PlatformFacts("GPU", cuda, {}, {}, None, None, "none", nvlink_fields=fields)
    assert says in build_meta(matrix, facts, "run", [], [], [])["bandwidthNote"]


CLOCKS = (1980, 1755, 1830)


def test_gpu_state_is_sampled_until_the_windows_end(nvml: FakeNvml) -> None:
    sampler = gpustate.Sampler(torch.device("cuda", 0))
    with sampler:
        time.sleep(0.15)
        assert nvml.initialised == 1 and sampler._thread is not None
    assert sampler._thread is None and nvml.initialised == 0
    reads = nvml.reads
    time.sleep(0.05)
    assert nvml.reads == reads  # stopped
    state, reason = sampler.state()
    assert reason is None and state is not None
    assert state["samples"] == reads >= 4  # entry, ~7 in the loop, exit
    assert (state["smClockMinMHz"], state["smClockMaxMHz"]) == (1755, 1980)
    assert state["powerMaxW"] == (650_000 + 1000 * reads) / 1000
    assert state["temperatureMaxC"] == max(60 + r % 5 for r in range(1, reads + 1))
    assert state["throttleReasons"] == 0x5
    assert state["throttleReasonNames"] == ["gpu_idle", "sw_power_cap"]
    # The clocks read r = 1..reads were CLOCKS[r % 3]; their median, worked out here.
    read = sorted(CLOCKS[r % len(CLOCKS)] for r in range(1, reads + 1))
    middle = len(read) // 2
    median = read[middle] if len(read) % 2 else (read[middle - 1] + read[middle]) / 2
    assert state["smClockMedianMHz"] == median
    assert state["powerCapped"] is True  # the one sw_power_cap sample
    assert state["clocksLocked"] is False  # applications clocks at their default


@pytest.mark.parametrize(("applications_mhz", "locked"), [(1980, False), (1410, True),
                                                          (None, None)])
def test_whether_clocks_were_locked(nvml: FakeNvml, applications_mhz: int | None,
                                    locked: bool | None) -> None:
    nvml.applications_mhz = applications_mhz
    sampler = gpustate.Sampler(torch.device("cuda", 0))
    with sampler:
        pass
    state, _ = sampler.state()
    assert state is not None and state["clocksLocked"] is locked


def test_the_applications_clocks_reason_means_locked(nvml: FakeNvml,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    nvml.applications_mhz = None  # not readable, but the clocks-event reason says so
    monkeypatch.setattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", lambda h: 0x2,
                        raising=False)
    sampler = gpustate.Sampler(torch.device("cuda", 0))
    with sampler:
        pass
    state, _ = sampler.state()
    assert state is not None and state["clocksLocked"] is True
    assert state["powerCapped"] is False


def test_the_sampler_stops_when_the_windows_raise(nvml: FakeNvml) -> None:
    sampler = gpustate.Sampler(torch.device("cuda", 0))
    with pytest.raises(torch.OutOfMemoryError), sampler:
        raise torch.OutOfMemoryError("in the windows")
    assert sampler._thread is None and nvml.initialised == 0
    assert sampler.state()[0] is not None


def test_no_gpu_state_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = gpustate.Sampler(torch.device("cpu"))
    with cpu:
        pass
    assert cpu.state() == (None, gpustate.NO_GPU)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as without the library
    gpu = gpustate.Sampler(torch.device("cuda", 0))
    with gpu:
        pass
    state, reason = gpu.state()
    assert state is None and reason is not None and reason.startswith("NVML unavailable")


H100_SXM = platform.KNOWN_GPUS[5].peaks


@pytest.mark.parametrize(("name", "model"), [
    ("NVIDIA H100 80GB HBM3", "H100"),  # the SXM part, as torch names it
    ("NVIDIA H100 PCIe", None),  # 756 bf16 TFLOP/s, 2 TB/s: not the SXM's peaks
    ("NVIDIA H100 NVL", None),
    ("NVIDIA H200", "H200"),
    ("NVIDIA H200 NVL", None),
    ("NVIDIA GH200 480GB", None),  # not an H200 (a substring match said so)
    ("NVIDIA B200", "B200"),
    ("NVIDIA GB200", "GB200"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA A100-SXM4-40GB", None),  # 1555 GB/s of HBM, not 2039
    ("NVIDIA A100 80GB PCIe", None),
    ("NVIDIA GeForce RTX 4090", None),
])
def test_peaks_match_whole_names_only(name: str, model: str | None) -> None:
    peaks = platform.datasheet_peaks(name)
    expected = next((g.peaks for g in platform.KNOWN_GPUS if g.model == model), None)
    assert peaks == expected
    if model == "H100":
        assert peaks == H100_SXM and peaks is not None and peaks.hbm_gbps == 3350


def test_gpu_state_over_ranks() -> None:
    from runner.report_gpustate import merge_gpu_states

    def rank(lo: float, hi: float, watts: float, celsius: float, bits: int) -> dict[str, Any]:
        return {"smClockMinMHz": lo, "smClockMaxMHz": hi, "powerMaxW": watts,
                "temperatureMaxC": celsius, "throttleReasons": bits, "samples": 10}

    merged = merge_gpu_states([rank(1800, 1980, 690, 70, 0x1), rank(1600, 1900, 700, 66, 0x40)])
    assert merged == {"smClockMinMHz": 1600, "smClockMaxMHz": 1980, "powerMaxW": 700,
                      "temperatureMaxC": 70, "throttleReasons": 0x41,
                      "throttleReasonNames": ["gpu_idle", "hw_thermal"], "samples": 20}
    assert merge_gpu_states([rank(1800, 1980, 690, 70, 0), None]) is None

    def full(median: float, capped: bool, locked: bool | None) -> dict[str, Any]:
        return {**rank(1500, 1980, 690, 70, 0x4 if capped else 0),
                "smClockMedianMHz": median, "powerCapped": capped, "clocksLocked": locked}

    merged = merge_gpu_states([full(1900, False, False), full(1850, True, None)])
    assert merged is not None
    # the slower GPU's median; power capped on any rank; locked unknown on one, so unknown
    assert (merged["smClockMedianMHz"], merged["powerCapped"], merged["clocksLocked"]) == (
        1850, True, None)
    merged = merge_gpu_states([full(1900, False, False), full(1850, False, True)])
    assert merged is not None and merged["clocksLocked"] is True
    merged = merge_gpu_states([full(1900, False, False), full(1850, False, False)])
    assert merged is not None and merged["clocksLocked"] is False
