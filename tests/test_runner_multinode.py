"""Multi-node: two launches of ``torchrun --nnodes 2 --nproc-per-node 2`` on this machine
(c10d rendezvous on 127.0.0.1 at a free port, gloo), told apart by ``MOESCOPE_NODE``, run
EP = 4 across the two "nodes" and post one report to a live server whose ``meta.host``
names both; killing one node's processes mid-run ends the other within the matrix's
``timeout_s``, with the failure in ``--out`` and the finished cases delivered."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from live import REPO, free_port
from live import ServerProcess as LiveServer
from runner_helpers import descendants, served_report

pytestmark = pytest.mark.live

TIMEOUT_S = 20  # the matrix's [timing] timeout_s: the process group's
NODES = ("node-a", "node-b")


def _matrix(tmp: Path, cases: int) -> Path:
    lines = ["seed = 5", "[shape]", "T = 32", "D = 64", "E = 8", "K = 2", "[timing]",
             "windows = 3", "iterations = 2", "warmup = 1", "warmup_ms = 50",
             f"timeout_s = {TIMEOUT_S}"]
    for i in range(cases):
        lines += ["[[case]]", 'mode = "inference"', "ep = 4", 'precision = "bf16"',
                  'pipeline = "standard"', f"F = {64 * (i + 1)}", "imbalance = 1",
                  'category = "multinode"']
    path = tmp / "matrix.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _launch(node: str, is_host: bool, port: int, matrix: Path, server: tuple[LiveServer, str],
            tmp: Path) -> subprocess.Popen[str]:
    """One node: torchrun with 2 ranks, its own session (so the test can kill the node,
    agent and ranks, as a lost machine), its own --out and spool."""
    with (tmp / f"{node}.log").open("w") as log:  # the child keeps its own descriptor
        return _popen(node, is_host, port, matrix, server, tmp, log)


def _popen(node: str, is_host: bool, port: int, matrix: Path, server: tuple[LiveServer, str],
           tmp: Path, log: Any) -> subprocess.Popen[str]:
    live, token = server
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
         "--nproc-per-node", "2", "--rdzv-backend", "c10d",
         "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "moescope-multinode",
         "--rdzv-conf", f"is_host={int(is_host)}", "--max-restarts", "0",
         "-m", "cli", "run", "--matrix", str(matrix), "--url", live.url,
         "--token", token, "--out", str(tmp / f"{node}.json"),
         "--spool", str(tmp / f"spool-{node}")],
        cwd=REPO, env={**os.environ, "MOESCOPE_NODE": node, "OMP_NUM_THREADS": "1"},
        stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _kill_node(launch: subprocess.Popen[str]) -> None:
    """The node lost at once: its torchrun agent and every rank, SIGKILL."""
    for pid in [launch.pid, *descendants(launch.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    launch.wait(timeout=30)


def _logs(tmp: Path) -> str:
    return "\n".join(f"--- {n}\n{(tmp / f'{n}.log').read_text()[-3000:]}" for n in NODES)


def test_two_nodes_post_one_report_naming_both(
        tmp_path: Path, runner_server: tuple[LiveServer, str]) -> None:
    matrix = _matrix(tmp_path, 2)
    port = free_port()
    launches = [_launch(n, n == NODES[0], port, matrix, runner_server, tmp_path)
                for n in NODES]
    try:
        codes = [p.wait(timeout=400) for p in launches]
    finally:
        for p in launches:
            _kill_node(p)
    assert codes == [0, 0], _logs(tmp_path)
    outs = [tmp_path / f"{n}.json" for n in NODES if (tmp_path / f"{n}.json").exists()]
    assert len(outs) == 1  # rank 0 alone writes the report
    report = json.loads(outs[0].read_text())
    served = served_report(runner_server[0].url, report["meta"]["runId"])
    host = report["meta"]["host"]
    assert sorted(host["nodes"]) == list(NODES)
    assert sorted(host["rankNodes"]) == ["node-a", "node-a", "node-b", "node-b"]
    assert host["worldSize"] == 4 and host["backend"] == "gloo"
    assert [c["ep"] for c in report["cases"]] == [4, 4]
    # Every rank of both nodes received rows: EP 4 ran across the two.
    assert all(len(c["receiveRows"]) == 4 and min(c["receiveRows"]) > 0
               for c in report["cases"])
    assert served == report


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _lose_mid_run(tmp: Path, server: tuple[LiveServer, str], lose: Any
                  ) -> tuple[int, float, str, list[int]]:
    """Both nodes started on 8 cases; once rank 0's node wrote a finished case, ``lose``
    (the other node's launch) is applied. The survivor's exit code, the seconds it took
    to end after the loss, its name, and the lost node's rank pids."""
    matrix = _matrix(tmp, 8)
    port = free_port()
    launches = dict(zip(NODES, (_launch(n, n == NODES[0], port, matrix, server, tmp)
                                for n in NODES), strict=True))
    try:
        # The node holding rank 0 writes its --out; wait for a finished case there.
        deadline = time.monotonic() + 300
        survivor = None
        while time.monotonic() < deadline and survivor is None:
            for node in NODES:
                out = tmp / f"{node}.json"
                if out.exists() and json.loads(out.read_text() or "{}").get("cases"):
                    survivor = node
            time.sleep(0.2)
        assert survivor is not None, _logs(tmp)
        lost = next(n for n in NODES if n != survivor)
        ranks = descendants(launches[lost].pid)
        lose(launches[lost])
        lost_at = time.monotonic()
        code = launches[survivor].wait(timeout=TIMEOUT_S + 60)
        return code, time.monotonic() - lost_at, survivor, ranks
    finally:
        for p in launches.values():
            _kill_node(p)


def _check_stopped_run(tmp: Path, live: LiveServer, survivor: str) -> None:
    """The survivor's --out names the failure; the service holds exactly its cases."""
    report = json.loads((tmp / f"{survivor}.json").read_text())
    served = served_report(live.url, report["meta"]["runId"])
    note = report["meta"]["runFailureNote"]
    # Rank 0 names what reached it first: its peers' closed connections (an Error), or its
    # own agent's SIGTERM when another local rank saw them first and the agent tore the
    # node down; either way the note names why, and the finished cases are delivered.
    assert note.startswith("The run stopped while running ") and (
        "Error" in note or "stopped by SIGTERM" in note), note
    finished = report["cases"]
    assert 1 <= len(finished) < 8
    assert served["cases"] == finished  # every finished case delivered, nothing more
    assert served["meta"]["host"]["nodes"] == report["meta"]["host"]["nodes"]


def test_a_lost_node_ends_the_other_within_the_timeout(
        tmp_path: Path, runner_server: tuple[LiveServer, str]) -> None:
    code, ended_after, survivor, _ = _lose_mid_run(tmp_path, runner_server, _kill_node)
    assert code != 0, _logs(tmp_path)
    # Within the process group's timeout (plus torchrun's own teardown).
    assert ended_after < TIMEOUT_S + 15, (ended_after, _logs(tmp_path))
    _check_stopped_run(tmp_path, runner_server[0], survivor)


def test_a_lost_agent_ends_its_ranks_and_the_other_node_within_a_minute(
        tmp_path: Path, runner_server: tuple[LiveServer, str]) -> None:
    """Only the other node's torchrun agent is killed: its ranks, orphaned, end (else they
    would run on, and the survivor's agent wait 300 s at torchrun's exit barrier)."""
    def kill_agent(launch: subprocess.Popen[str]) -> None:
        os.kill(launch.pid, signal.SIGKILL)
        launch.wait(timeout=30)

    code, ended_after, survivor, ranks = _lose_mid_run(tmp_path, runner_server, kill_agent)
    assert code != 0, _logs(tmp_path)
    assert ended_after <= 60, (ended_after, _logs(tmp_path))
    assert ranks and not any(_alive(pid) for pid in ranks), _logs(tmp_path)
    _check_stopped_run(tmp_path, runner_server[0], survivor)
