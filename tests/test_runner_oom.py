"""An out-of-memory error on one rank of a two-rank gloo run (injected through
MOESCOPE_INJECT_OOM), in the experts' forward or in autograd's backward of the experts:
the other rank does not hang, the OOM is counted and explained in the posted case, and
the next case runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from injection import env_with_injection
from runner_helpers import run_posted

from ingest.validate import validate_report
from runner.spec import CaseSpec

pytestmark = pytest.mark.live

LATE = CaseSpec("inference", 2, "bf16", "standard", "oom_late", 64, 1.0)  # OOM in numerics
BACKWARD = CaseSpec("training", 2, "mxfp8", "standard", "oom_backward", 64, 1.5)
EARLY = CaseSpec("training", 2, "bf16", "staged", "oom_early", 64, 1.5)  # OOM before timing
AFTER = CaseSpec("inference", 2, "mxfp8", "staged", "after", 64, 1.0)


def test_an_oom_on_one_rank_is_counted_and_the_run_goes_on(tmp_path: Path) -> None:
    lines = ["seed = 1", "[shape]", "T = 32", "D = 64", "E = 4", "K = 2", "[timing]",
             "windows = 2", "iterations = 1", "warmup = 1"]
    for spec in (LATE, BACKWARD, EARLY, AFTER):
        lines += ["[[case]]", f'mode = "{spec.mode}"', "ep = 2",
                  f'precision = "{spec.precision}"', f'pipeline = "{spec.pipeline}"',
                  "F = 64", f"imbalance = {spec.imbalance}", f'category = "{spec.category}"']
    # oom_backward: rank 1 runs out in autograd's backward of the experts while the
    # backward pass is timed; rank 0 must not be left waiting in the backward's
    # collectives (the test would time out).
    env = env_with_injection(oom="rank=1,case=oom_late,phase=numerics;"
                                 "rank=1,case=oom_backward,phase=backward,pass=backward;"
                                 "rank=0,case=oom_early,phase=combined")
    run = run_posted(tmp_path, "\n".join(lines) + "\n", env, timeout=180)
    served, result = run.served, run.result
    validate_report(served)
    cases = {c["id"]: c for c in served["cases"]}
    assert list(cases) == [LATE.id, BACKWARD.id, AFTER.id]

    late = cases[LATE.id]  # timed, then out of memory in the reference check on rank 1
    assert late["ooms"] == 1
    assert late["numericalAccepted"] is None and late["numericalRelativeError"] is None
    assert late["layerMS"] > 0 and len(late["windows"]["combined"]) == 2
    assert "out of memory in the numerics phase on rank(s) 1" in late["oomNote"]

    backward = cases[BACKWARD.id]  # combined and forward timed, then out in the backward
    assert backward["ooms"] == 1
    assert "out of memory in the backward phase on rank(s) 1" in backward["oomNote"]
    assert len(backward["windows"]["combined"]) == 2 and len(backward["windows"]["forward"]) == 2
    assert "backward" not in backward["windows"] and backward["backwardMS"] is None
    assert backward["numericalAccepted"] is None

    after = cases[AFTER.id]  # the next case runs normally, carrying the skip's reason
    assert after["ooms"] == 0 and after["numericalAccepted"] is True
    assert "oomNote" not in after
    assert after["runtimeSkipped"] == [
        f"{EARLY.id}: out of memory in the combined phase on rank(s) 0"]
    assert "`ooms` counted" in served["meta"]["memoryNote"]
    assert EARLY.id in run.out["meta"]["runtimeSkippedNote"]
    assert "skipped: out of memory in the combined phase" in result.stdout


def test_the_injection_is_test_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner does not read MOESCOPE_INJECT_OOM: only injection.install arms it."""
    import injection

    from runner import oom

    monkeypatch.setattr(oom, "INJECTORS", [])
    monkeypatch.setattr(oom, "STATE", oom.OomState(rank=0, case_id="x-oom", phase="numerics"))
    monkeypatch.setenv(injection.OOM_ENV, "rank=0,case=oom,phase=numerics")
    assert oom.guarded(lambda: "ran", lambda: "zeros") == "ran"
    injection.install()
    assert oom.guarded(lambda: "ran", lambda: "zeros") == "zeros"
    assert oom.STATE.hit
