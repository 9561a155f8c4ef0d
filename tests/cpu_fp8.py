"""Test-only: ``MOESCOPE_TEST_CPU_FP8=1`` makes the start-up fp8 probe try its candidates
on the CPU too (``runner.fp8_probe.first_native``), where torch 2.13 runs the rowwise
``torch._scaled_mm``: the runner then takes fp8 as native, so an fp8 case runs the scaled
GEMMs end to end on gloo. The runner itself keeps the CPU emulated (a CPU kernel says
nothing about a GPU's); tests/site/sitecustomize.py calls ``install`` in every
interpreter a test starts with ``site_hooks.env_with_site``."""

from __future__ import annotations

import os

ENV = "MOESCOPE_TEST_CPU_FP8"


def install() -> None:
    if os.environ.get(ENV) != "1":
        return
    from runner import fp8_probe, platform  # the module whose probe_fp8 detect calls

    platform.probe_fp8 = fp8_probe.first_native
