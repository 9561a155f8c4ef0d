"""An out-of-memory error (MOESCOPE_INJECT_OOM) or another exception (a RuntimeError
through MOESCOPE_INJECT_ERROR, where a scaled GEMM rejecting a shape would raise) on one
rank of a two-rank gloo run, in the experts' forward, in autograd's backward of the
experts, or in the numerical check: the other rank does not hang, the ranks agree on it
after the phase, the posted case counts the OOM or records the failure (``failure``,
caveat ``failed``), and the next case runs. One launch runs both sets of cases."""

from __future__ import annotations

import pytest
from injection import env_with_injection
from live import ServerProcess
from runner_helpers import PostedRun, run_posted

from ingest.derived import caveats
from ingest.schema import Case, Meta
from ingest.validate import validate_report
from runner.spec import CaseSpec

pytestmark = pytest.mark.live

OOM_LATE = CaseSpec("inference", 2, "bf16", "standard", "oom_late", 64, 1.0)  # in numerics
OOM_BACKWARD = CaseSpec("training", 2, "mxfp8", "standard", "oom_backward", 64, 1.5)
OOM_EARLY = CaseSpec("training", 2, "bf16", "staged", "oom_early", 64, 1.5)  # before timing
OOM_AFTER = CaseSpec("inference", 2, "mxfp8", "staged", "after", 64, 1.0)
LATE = CaseSpec("inference", 2, "nvfp4", "staged", "fail_late", 64, 1.0)  # in numerics
EARLY = CaseSpec("training", 2, "bf16", "standard", "fail_early", 64, 1.5)  # before timing
AFTER = CaseSpec("training", 2, "mxfp8", "mega", "after", 64, 1.0)
CASES = (OOM_LATE, OOM_BACKWARD, OOM_EARLY, OOM_AFTER, LATE, EARLY, AFTER)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory,
        runner_server: tuple[ServerProcess, str]) -> PostedRun:
    lines = ["seed = 1", "[shape]", "T = 32", "D = 64", "E = 4", "K = 2", "[timing]",
             "windows = 2", "iterations = 1", "warmup = 1", "warmup_ms = 0"]
    for spec in CASES:
        lines += ["[[case]]", f'mode = "{spec.mode}"', "ep = 2",
                  f'precision = "{spec.precision}"', f'pipeline = "{spec.pipeline}"',
                  "F = 64", f"imbalance = {spec.imbalance}", f'category = "{spec.category}"']
    # oom_backward: rank 1 runs out in autograd's backward of the experts while the
    # backward pass is timed; rank 0 must not be left waiting in the backward's
    # collectives (the test would time out).
    env = env_with_injection(oom="rank=1,case=oom_late,phase=numerics;"
                                 "rank=1,case=oom_backward,phase=backward,pass=backward;"
                                 "rank=0,case=oom_early,phase=combined",
                             error="rank=1,case=fail_late,phase=numerics;"
                                   "rank=0,case=fail_early,phase=combined")
    posted = run_posted(runner_server, tmp_path_factory.mktemp("failure"),
                        "\n".join(lines) + "\n", env, timeout=300)
    validate_report(posted.served)
    return posted


def test_the_cases_that_ran_were_posted(run: PostedRun) -> None:
    assert [c["id"] for c in run.served["cases"]] == [
        OOM_LATE.id, OOM_BACKWARD.id, OOM_AFTER.id, LATE.id, AFTER.id]


def test_an_oom_on_one_rank_is_counted_and_the_run_goes_on(run: PostedRun) -> None:
    served, result = run.served, run.result
    cases = {c["id"]: c for c in served["cases"]}
    late = cases[OOM_LATE.id]  # timed, then out of memory in the reference check on rank 1
    assert late["ooms"] == 1
    assert late["numericalAccepted"] is None and late["numericalRelativeError"] is None
    assert late["layerMS"] > 0 and len(late["windows"]["combined"]) == 2
    assert "out of memory in the numerics phase on rank(s) 1" in late["oomNote"]

    backward = cases[OOM_BACKWARD.id]  # combined and forward timed, then out in the backward
    assert backward["ooms"] == 1
    assert "out of memory in the backward phase on rank(s) 1" in backward["oomNote"]
    assert len(backward["windows"]["combined"]) == 2 and len(backward["windows"]["forward"]) == 2
    assert "backward" not in backward["windows"] and backward["backwardMS"] is None
    assert backward["numericalAccepted"] is None

    after = cases[OOM_AFTER.id]  # the next case runs normally, carrying the skip's reason
    assert after["ooms"] == 0 and after["numericalAccepted"] is True
    assert "oomNote" not in after
    assert after["runtimeSkipped"] == [
        f"{OOM_EARLY.id}: out of memory in the combined phase on rank(s) 0"]
    assert "`ooms` counted" in served["meta"]["memoryNote"]
    assert OOM_EARLY.id in run.out["meta"]["runtimeSkippedNote"]
    assert "skipped: out of memory in the combined phase" in result.stdout


def test_an_error_on_one_rank_is_recorded_on_the_case_and_the_run_goes_on(
        run: PostedRun) -> None:
    served = run.served
    cases = {c["id"]: c for c in served["cases"]}
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
