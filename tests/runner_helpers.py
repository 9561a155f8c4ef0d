"""``moescope run`` on two gloo ranks against a live server, for the runner's end-to-end
tests: what the run printed, what it wrote to ``--out`` and what the service serves."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from live import REPO, ServerProcess


@dataclass
class PostedRun:
    result: subprocess.CompletedProcess[str]
    out: dict[str, Any]  # the report as written to --out
    served: dict[str, Any]  # the report as the service gives it back


def run_posted(server: tuple[ServerProcess, str], tmp_path: Path, matrix_text: str,
               env: dict[str, str] | None = None, timeout: float = 300) -> PostedRun:
    """Run the matrix with ``--nproc 2``, posting to ``server`` (the session's
    ``runner_server``: live server, ingest token); the run must exit 0."""
    live, token = server
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(matrix_text)
    out = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "cli", "run", "--matrix", str(matrix), "--nproc", "2",
         "--url", live.url, "--token", token, "--out", str(out),
         "--spool", str(tmp_path / "spool")],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, **(env or {})},
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    written = json.loads(out.read_text())
    return PostedRun(result, written, served_report(live.url, written["meta"]["runId"]))


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (torchrun starts each rank in a session of its own, so
    killing a launch's process group would leave its ranks running)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def served_report(url: str, run_id: str) -> dict[str, Any]:
    """The report the service holds for ``run_id``, as it serves it."""
    page = httpx.get(f"{url}/api/v1/reports", params={"q": run_id}, timeout=10).json()
    served: dict[str, Any] = httpx.get(
        f"{url}/api/v1/reports/{page['items'][0]['id']}/report.json", timeout=10).json()
    return served


def run_args(tmp_path: Path, matrix_text: str) -> tuple[list[str], Path]:
    """``moescope run --nproc 2`` of ``matrix_text`` with ``--out`` (returned) and a spool
    in ``tmp_path``, posting nowhere."""
    matrix, out = tmp_path / "matrix.toml", tmp_path / "report.json"
    matrix.write_text(matrix_text)
    return [sys.executable, "-m", "cli", "run", "--matrix", str(matrix), "--nproc", "2",
            "--out", str(out), "--spool", str(tmp_path / "spool")], out


def kill_tree(pid: int) -> None:
    """SIGKILL to ``pid`` and every process below it, those already ended aside."""
    for each in [*descendants(pid), pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(each, signal.SIGKILL)


def one_case_matrix(mode: str, category: str, *, tokens: int, windows: int,
                    iterations: int) -> str:
    """A matrix of one small EP 2, bf16, standard case (D 64, E 4, K 2, F 64)."""
    return "\n".join([
        "seed = 3", "[shape]", f"T = {tokens}", "D = 64", "E = 4", "K = 2", "[timing]",
        f"windows = {windows}", f"iterations = {iterations}", "warmup = 1", "warmup_ms = 1",
        "[[case]]", f'mode = "{mode}"', "ep = 2", 'precision = "bf16"',
        'pipeline = "standard"', "F = 64", "imbalance = 1.0", f'category = "{category}"',
    ]) + "\n"
