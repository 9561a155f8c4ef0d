"""SIGTERM to a ``--nproc 2`` run while its ranks measure the ceilings (the pass before
the first case, slowed by tests/slow_ceilings.py so the signal lands inside it): the run
ends within seconds and rank 0's ``--out`` carries a ``runFailureNote`` naming the
signal and the ceiling pass, with no case and no ceiling reported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from live import REPO
from runner_helpers import kill_tree, one_case_matrix, run_args
from site_hooks import env_with_site
from slow_ceilings import ENV

STOP_WITHIN_S = 30
MATRIX = one_case_matrix("inference", "stop", tokens=16, windows=1, iterations=1)


def test_sigterm_in_the_ceiling_pass_writes_the_note(tmp_path: Path) -> None:
    args, out = run_args(tmp_path, MATRIX)
    marker = tmp_path / "in-ceilings"
    env = {**env_with_site(dict(os.environ)), ENV: f"120,{marker}", "OMP_NUM_THREADS": "1"}
    log = (tmp_path / "run.log").open("w")
    run = subprocess.Popen(args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not all(Path(f"{marker}.{rank}").exists() for rank in (0, 1)):
            assert time.monotonic() < deadline and run.poll() is None, \
                (tmp_path / "run.log").read_text()
            time.sleep(0.1)
        assert not out.exists()  # the report is made after the ceilings
        os.kill(run.pid, signal.SIGTERM)  # as a batch scheduler stops a job
        stopped_at = time.monotonic()
        code = run.wait(timeout=STOP_WITHIN_S + 60)
        took = time.monotonic() - stopped_at
    finally:
        kill_tree(run.pid)
        log.close()
    output = (tmp_path / "run.log").read_text()
    assert code == 1, output
    assert took < STOP_WITHIN_S, (took, output)
    report = json.loads(out.read_text())
    note = report["meta"]["runFailureNote"]
    assert note.startswith("The run stopped in the ceiling pass, before the first case: "
                           "Stopped: stopped by SIGTERM"), note
    assert report["cases"] == []
    assert "no case ran (the run stopped)" in output
    assert report["meta"].get("measuredCeilings") is None
