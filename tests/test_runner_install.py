"""A runner-only install: the runner's commands in interpreters that cannot import any
package of the server extra (the blocker refuses what pyproject.toml lists there), as on
a GPU node where only ``pip install 'moescope[runner]'`` ran."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from api_helpers import small_report
from conftest import LiveServer, free_port, live_server
from import_blocker import ENV as BLOCK_ENV
from live import REPO
from site_hooks import env_with_site

pytestmark = pytest.mark.live


def server_packages() -> set[str]:
    """Import names of the server extra's distributions (psycopg[binary]>=3 -> psycopg,
    dash-ag-grid -> dash_ag_grid), and starlette, which fastapi brings."""
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["server"]
    names = {re.split(r"[\[<>=,; ]", requirement, maxsplit=1)[0].lower().replace("-", "_")
             for requirement in extra}
    return names | {"starlette"}


BLOCKED = server_packages()


def moescope(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = env_with_site({**os.environ, BLOCK_ENV: ",".join(sorted(BLOCKED))})
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=timeout)


def test_the_blocker_blocks_every_server_package() -> None:
    assert {"fastapi", "sqlalchemy", "dash", "plotly", "uvicorn", "alembic",
            "psycopg"} <= BLOCKED
    env = env_with_site({**os.environ, BLOCK_ENV: ",".join(sorted(BLOCKED))})
    for name in sorted(BLOCKED):
        found = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True,
                               text=True, env=env, timeout=60)
        assert found.returncode == 1 and "ModuleNotFoundError" in found.stderr, name


# The command line's modules that a runner-only install loads (cli/parser.py names, for each
# command, the module that runs it with and without the server extra).
CLIENT_MODULES = ("cli.main", "cli.parser", "cli.errors", "cli.service_client", "cli.ingest",
                  "cli.export", "cli.export_target", "cli.regressions",
                  "cli.regressions_markdown", "cli.runner")
SERVER_COMMAND_MODULES = ("cli.serve", "cli.migrations", "cli.tokens", "cli.database",
                          "cli.ingest_database", "cli.export_database",
                          "cli.regressions_database", "cli.platforms", "cli.alerts")


def test_the_clients_modules_import_without_the_server_and_the_others_need_it() -> None:
    env = env_with_site({**os.environ, BLOCK_ENV: ",".join(sorted(BLOCKED))})
    every = sorted(p.stem for p in (REPO / "cli").glob("*.py") if not p.stem.startswith("_"))
    assert sorted(m.removeprefix("cli.") for m in CLIENT_MODULES + SERVER_COMMAND_MODULES) \
        == every
    for name in CLIENT_MODULES:
        found = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True,
                               text=True, cwd=REPO, env=env, timeout=60)
        assert found.returncode == 0, (name, found.stderr)
    for name in SERVER_COMMAND_MODULES:
        found = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True,
                               text=True, cwd=REPO, env=env, timeout=60)
        assert "ModuleNotFoundError" in found.stderr, name


def test_model_needs_no_server(tmp_path: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text("[shape]\nT = 4\nD = 8\nE = 4\nK = 2\n[[case]]\nmode = 'inference'\n"
                      "ep = 2\nprecision = 'bf16'\npipeline = 'standard'\nF = 16\n"
                      "imbalance = 1\ncategory = 'tiny'\n")
    ran = moescope("model", "--matrix", str(matrix), "--json")
    assert ran.returncode == 0, ran.stderr
    [line] = ran.stdout.splitlines()
    # 6 FLOPs a MAC of gate, up and down: 6 * (T*K = 8 rows) * D=8 * F=16
    assert json.loads(line)["usefulFlops"] == 6 * 8 * 8 * 16


def test_server_commands_say_which_extra_to_install(tmp_path: Path) -> None:
    for args in (["serve"], ["db", "current"], ["token", "list"],
                 ["ingest", str(tmp_path / "r.json")], ["export", "latest"],
                 ["regressions", "1"], ["platforms", "1", "2"]):
        ran = moescope(*args)
        assert ran.returncode == 2, (args, ran.stderr)
        assert "needs the server extra" in ran.stderr, args
        assert "pip install 'moescope[server]'" in ran.stderr, args
        assert "Traceback" not in ran.stderr, args


def test_ingest_url_export_url_run_and_flush_need_no_server(tmp_path: Path,
                                                  reference: dict[str, Any]) -> None:
    report = tmp_path / "r.json"
    report.write_text(json.dumps(small_report(reference, 2)))
    matrix = tmp_path / "m.toml"
    matrix.write_text("[shape]\nT = 8\nD = 32\nE = 2\nK = 1\n[timing]\nwindows = 1\n"
                      "iterations = 1\nwarmup = 0\nwarmup_ms = 0\n[[case]]\n"
                      "mode = 'inference'\nep = 1\nprecision = 'bf16'\npipeline = 'standard'\n"
                      "F = 32\nimbalance = 1\ncategory = 'alone'\n")
    spool, out = tmp_path / "spool", tmp_path / "run.json"
    # The server runs with everything installed; only the clients are runner-only.
    with live_server(f"sqlite:///{tmp_path / 'moescope.db'}", tmp_path) as live:
        token = live.token("ingest")
        ingested = moescope("ingest", str(report), "--url", live.url, "--token", token)
        assert ingested.returncode == 0, ingested.stderr
        assert "stored as report" in ingested.stdout and "(2 cases)" in ingested.stdout
        exported = moescope("export", "latest", "--url", live.url, "--token",
                            live.token("read"), "-o", str(tmp_path / "e.html"))
        assert exported.returncode == 0, exported.stderr
        assert (tmp_path / "e.html").read_bytes().startswith(b"<!DOCTYPE html>")
        # One report: nothing has history, so nothing regressed and CI passes.
        gated = moescope("regressions", "1", "--url", live.url, "--token", live.token("read"))
        assert gated.returncode == 0, gated.stderr
        assert "0 regression(s)" in gated.stderr and "2 with fewer than 3" in gated.stderr

        # A run whose server is away keeps its case in the spool; flush delivers it.
        dead = f"http://127.0.0.1:{free_port()}"
        ran = moescope("run", "--matrix", str(matrix), "--nproc", "1", "--url", dead,
                       "--token", token, "--deadline", "0.5", "--spool", str(spool),
                       "--out", str(out), timeout=240)
        assert ran.returncode == 1 and "1 case(s) still spooled" in ran.stderr, ran.stderr
        run_id = json.loads(out.read_text())["meta"]["runId"]
        flushed = moescope("runner", "flush", "--spool", str(spool), "--url", live.url,
                           "--token", token)
        assert flushed.returncode == 0, flushed.stderr
        assert "1 case(s) delivered" in flushed.stdout
        assert [c["id"] for c in stored(live, run_id)] == \
            [c["id"] for c in json.loads(out.read_text())["cases"]]


def stored(live: LiveServer, run_id: str) -> list[dict[str, Any]]:
    import httpx

    page = httpx.get(f"{live.url}/api/v1/reports", params={"q": run_id}, timeout=10).json()
    [item] = page["items"]
    document = httpx.get(f"{live.url}/api/v1/reports/{item['id']}/report.json",
                         timeout=10).json()
    cases: list[dict[str, Any]] = document["cases"]
    return cases
