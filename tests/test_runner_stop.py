"""A ``--nproc 2`` run that loses a rank (SIGKILL) or is told to stop (SIGTERM to the
launcher, as a batch scheduler does) mid-run: it ends within seconds, rank 0's ``--out``
carries the ``runFailureNote`` and the service holds exactly the cases finished before."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from live import REPO
from live import ServerProcess as LiveServer
from runner_helpers import descendants, served_report

CASES = 24  # far more than run before the stop
STOP_WITHIN_S = 30  # gloo sees a dead peer at once; rank 0 then delivers and exits


@pytest.fixture
def live(runner_server: tuple[LiveServer, str]) -> LiveServer:
    return runner_server[0]


def _matrix(tmp: Path) -> Path:
    lines = ["seed = 3", "[shape]", "T = 32", "D = 64", "E = 4", "K = 2", "[timing]",
             "windows = 2", "iterations = 2", "warmup = 1", "warmup_ms = 20"]
    for i in range(CASES):
        lines += ["[[case]]", 'mode = "inference"', "ep = 2", 'precision = "bf16"',
                  'pipeline = "standard"', f"F = {64 * (i % 4 + 1)}", f"imbalance = {1 + i / 24}",
                  'category = "stop"']
    path = tmp / "matrix.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _stopped_mid_run(tmp: Path, live: LiveServer, stop: Callable[[subprocess.Popen[str]], None]
                     ) -> tuple[int, float, dict[str, Any], str]:
    """``moescope run --nproc 2`` until --out holds a finished case, then ``stop(run)``:
    its exit code, the seconds it took to end, its --out and its output."""
    out = tmp / "report.json"
    log = (tmp / "run.log").open("w")
    run = subprocess.Popen(
        [sys.executable, "-m", "cli", "run", "--matrix", str(_matrix(tmp)), "--nproc", "2",
         "--url", live.url, "--token", live.token("ingest"), "--out", str(out),
         "--spool", str(tmp / "spool")],
        cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=log,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not (out.exists() and json.loads(out.read_text() or "{}").get("cases")):
            assert time.monotonic() < deadline and run.poll() is None, \
                (tmp / "run.log").read_text()
            time.sleep(0.1)
        stop(run)
        stopped_at = time.monotonic()
        code = run.wait(timeout=STOP_WITHIN_S + 60)
        return code, time.monotonic() - stopped_at, json.loads(out.read_text()), \
            (tmp / "run.log").read_text()
    finally:
        for pid in [*descendants(run.pid), run.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()


def _check_delivered(live: LiveServer, report: dict[str, Any], output: str) -> None:
    finished = report["cases"]
    assert 1 <= len(finished) < CASES, output
    assert served_report(live.url, report["meta"]["runId"])["cases"] == finished


@pytest.mark.live
def test_a_killed_rank_ends_the_run_with_the_note(tmp_path: Path, live: LiveServer) -> None:
    def kill_rank_1(run: subprocess.Popen[str]) -> None:
        ranks = [p for p in descendants(run.pid)
                 if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()]
        assert len(ranks) == 2  # the spawned ranks (the resource tracker aside)
        os.kill(max(ranks), signal.SIGKILL)  # started second: rank 1

    code, took, report, output = _stopped_mid_run(tmp_path, live, kill_rank_1)
    assert code == 1, output
    assert took < STOP_WITHIN_S, (took, output)
    note = report["meta"]["runFailureNote"]
    assert note.startswith("The run stopped while running ") and "Error" in note, note
    _check_delivered(live, report, output)


@pytest.mark.live
def test_sigterm_writes_the_note_and_delivers_the_finished_cases(
        tmp_path: Path, live: LiveServer) -> None:
    code, took, report, output = _stopped_mid_run(
        tmp_path, live, lambda run: os.kill(run.pid, signal.SIGTERM))
    assert code == 1, output
    assert took < STOP_WITHIN_S, (took, output)
    note = report["meta"]["runFailureNote"]
    assert "Stopped: stopped by SIGTERM" in note, note
    _check_delivered(live, report, output)
