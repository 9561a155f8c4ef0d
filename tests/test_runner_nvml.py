"""NVLink counters through NVML: which GPU and which links the runner asks for.

No GPU or NVML here: ``pynvml`` is replaced by a stand-in that answers like NVML does
(nvml.h: the throughput fields count the link named by ``scopeId``, all links summed for
``UINT_MAX``; KiB), and the CUDA device's UUID is given, so the test checks the request
the runner makes, and that every ``nvmlInit`` is paired with an ``nvmlShutdown``."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from runner import platform

TX, RX = 138, 139
UUID = "8a6b3f1e-0c2d-4e5f-9a8b-7c6d5e4f3a2b"
LINKS = 18


class FakeNvml:
    """Two GPUs in NVML's order; ours is the second (as with CUDA_VISIBLE_DEVICES=1)."""

    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = TX
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = RX

    def __init__(self) -> None:
        self.initialised = 0
        self.handles = {"GPU-other": "handle-0", f"GPU-{UUID}": "handle-1"}

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self.initialised += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.initialised -= 1

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:  # noqa: N802
        return self.handles[uuid]

    def nvmlDeviceGetFieldValues(self, handle: str, fields: list[Any]) -> list[Any]:  # noqa: N802
        per_link_kib = {"handle-0": 7, "handle-1": 100}[handle]
        values = []
        for field in fields:
            field_id, scope = field if isinstance(field, tuple) else (field, 0)
            kib = per_link_kib * (LINKS if scope == 0xFFFFFFFF else 1)
            kib *= 2 if field_id == RX else 1
            values.append(SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(ullVal=kib)))
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
    assert counters == (100 * LINKS * 1024, 200 * LINKS * 1024)
    assert nvml.initialised == 0


def test_driver_version_shuts_nvml_down(nvml: FakeNvml) -> None:
    nvml.nvmlSystemGetDriverVersion = lambda: b"570.1"  # type: ignore[attr-defined]
    assert platform.nvml_driver_version() == "570.1"
    assert nvml.initialised == 0


@pytest.mark.parametrize(("cuda", "readable", "says"), [
    (True, True, "NVLink TX/RX are NVML data counters"),
    (True, False, "no NVML NVLink counters on this GPU"),
    (False, False, "no GPU, no NVML"),
])
def test_the_bandwidth_note_says_whether_nvlink_was_read(
        cuda: bool, readable: bool, says: str) -> None:
    from runner.matrix import parse_matrix
    from runner.report import PlatformFacts, build_meta

    matrix = parse_matrix({"shape": {"T": 8, "D": 32, "E": 2, "K": 1}, "matrix": {
        "mode": "inference", "ep": 1, "precision": "bf16", "pipeline": "standard", "F": 32,
        "imbalance": 1, "category": "c"}})
    facts = PlatformFacts("GPU", cuda, {}, {}, None, None, "none", nvlink_readable=readable)
    assert says in build_meta(matrix, facts, "run", [], [], [])["bandwidthNote"]
