"""The GB300 NVL72 reference report shipped as package data: the demo's data, the tests'
and the benches' fixture."""

from __future__ import annotations

from importlib import resources

REFERENCE_REPORT = "gb300-nvl72-isolated-v6.json"


def reference_report_text() -> str:
    return resources.files("ingest").joinpath("data", REFERENCE_REPORT).read_text("utf-8")
