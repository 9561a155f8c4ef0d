"""Running a real ``moescope serve`` and scratch Postgres databases, for the tests and the
benchmarks alike (both need a live server on a free port and a database to throw away)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
from sqlalchemy import make_url

REPO = Path(__file__).resolve().parent.parent


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL (``postgresql+psycopg://``) as psycopg itself takes it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def scratch_postgres_database(server_url: str, prefix: str = "moescope_t") -> Iterator[str]:
    """A new, empty database on the server of ``server_url``, dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = libpq_url(make_url(server_url).set(database="postgres").render_as_string(False))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServerProcess:
    url: str
    database_url: str
    process: subprocess.Popen[bytes]
    log: Path

    def token(self, scope: str) -> str:
        """A new token of ``scope`` in the server's database (through the CLI)."""
        out = subprocess.run(
            [sys.executable, "-m", "cli", "token", "create", f"live-{scope}",
             "--scope", scope, "--database-url", self.database_url],
            check=True, capture_output=True, text=True, cwd=REPO,
        )
        return out.stdout.strip().splitlines()[-1]


def wait_until_up(
    url: str, process: subprocess.Popen[bytes], log: Path, *, path: str = "/healthz",
    timeout: float = 60,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(url + path, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server not up after {timeout} s:\n{log.read_text()}")


@contextmanager
def serve_process(
    database_url: str, log: Path, *extra_args: str, env: dict[str, str] | None = None,
    port: int | None = None, ready_path: str = "/healthz",
) -> Iterator[ServerProcess]:
    """``moescope serve`` on a free port (or ``port``, to restart one), stopped afterwards."""
    port = port or free_port()
    full_env = {**os.environ, "MOESCOPE_DATABASE_URL": database_url, **(env or {})}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli", "serve", "--port", str(port),
             "--log-level", "warning", *extra_args],
            stdout=out, stderr=subprocess.STDOUT, env=full_env, cwd=REPO,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process, log, path=ready_path)
        yield ServerProcess(url, database_url, process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
