"""An exception other than an OOM on one rank of a two-rank gloo run (a RuntimeError
injected through MOESCOPE_INJECT_ERROR into the experts, where a scaled GEMM rejecting a
shape would raise): the ranks agree on it after the phase, the posted case records it
(``failure``, caveat ``failed``), the other rank does not hang, and the next case runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from injection import env_with_injection
from runner_helpers import run_posted

from ingest.derived import caveats
from ingest.schema import Case, Meta
from ingest.validate import validate_report
from runner.spec import CaseSpec

pytestmark = pytest.mark.live

LATE = CaseSpec("inference", 2, "nvfp4", "staged", "fail_late", 64, 1.0)  # in numerics
EARLY = CaseSpec("training", 2, "bf16", "standard", "fail_early", 64, 1.5)  # before timing
AFTER = CaseSpec("training", 2, "mxfp8", "mega", "after", 64, 1.0)


def test_an_error_on_one_rank_is_recorded_on_the_case_and_the_run_goes_on(
        tmp_path: Path) -> None:
    lines = ["seed = 1", "[shape]", "T = 32", "D = 64", "E = 4", "K = 2", "[timing]",
             "windows = 2", "iterations = 1", "warmup = 1", "timeout_s = 120"]
    for spec in (LATE, EARLY, AFTER):
        lines += ["[[case]]", f'mode = "{spec.mode}"', "ep = 2",
                  f'precision = "{spec.precision}"', f'pipeline = "{spec.pipeline}"',
                  "F = 64", f"imbalance = {spec.imbalance}", f'category = "{spec.category}"']
    env = env_with_injection(error="rank=1,case=fail_late,phase=numerics;"
                                   "rank=0,case=fail_early,phase=combined")
    run = run_posted(tmp_path, "\n".join(lines) + "\n", env, timeout=240)
    served = run.served
    validate_report(served)
    cases = {c["id"]: c for c in served["cases"]}
    assert list(cases) == [LATE.id, AFTER.id]

    late = cases[LATE.id]  # timed, then the error in the numerical check on rank 1
    injected = "RuntimeError: injected by MOESCOPE_INJECT_ERROR (rank 1, phase numerics"
    assert late["failure"].startswith(f"rank 1, numerics phase: {injected}")
    assert late["ooms"] == 0 and "oomNote" not in late
    assert late["layerMS"] > 0 and len(late["windows"]["combined"]) == 2
    assert late["numericalAccepted"] is None and late["nvlinkTXGBps"] is None
    codes = {c.code for c in caveats(Meta.model_validate(served["meta"]),
                                     Case.model_validate(late))}
    assert "failed" in codes

    after = cases[AFTER.id]  # the next case runs normally, carrying the skip's reason
    assert after["failure"] is None and after["numericalAccepted"] is True
    (skip,) = after["runtimeSkipped"]
    assert skip.startswith(f"{EARLY.id}: failed in the combined phase on rank(s) 0; "
                           f"rank 0, combined phase: RuntimeError: injected")
