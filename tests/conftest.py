"""Fixtures: every database test runs on SQLite and on a real Postgres.

Postgres comes from MOESCOPE_TEST_POSTGRES_URL. When it is unreachable the Postgres
half is skipped on a laptop, and fails the run when CI=true.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, make_url, text
from sqlalchemy.orm import Session

from app.cli import reference_report_text
from app.core.config import get_settings
from app.core.db import engine_for
from app.main import create_app
from app.models import Base
from app.repository import tokens
from db.migrate import upgrade

POSTGRES_URL = os.environ.get(
    "MOESCOPE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
REPO = Path(__file__).resolve().parent.parent


def postgres_reachable() -> str | None:
    """None when reachable, else the reason."""
    try:
        with psycopg.connect(libpq_url(POSTGRES_URL), connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"Postgres at {POSTGRES_URL} unreachable: {exc}"


def libpq_url(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def require_postgres() -> None:
    reason = postgres_reachable()
    if reason is None:
        return
    if IN_CI:
        pytest.fail(reason + " (CI=true: Postgres tests may not skip)", pytrace=False)
    pytest.skip(reason)


def reset_postgres(url: str) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        conn.execute("CREATE SCHEMA public")


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated, empty database of each kind, shared by the session's tests."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'moescope.db'}"
    else:
        require_postgres()
        url = POSTGRES_URL
        reset_postgres(url)
    upgrade(url)
    return url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """The database, emptied after each test so no test sees another's rows."""
    eng = engine_for(database_url)
    yield eng
    with eng.begin() as conn:
        tables = [t.name for t in reversed(Base.metadata.sorted_tables)]
        if eng.dialect.name == "postgresql":
            conn.execute(text(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE"))
        else:
            for table in tables:
                conn.execute(text(f"DELETE FROM {table}"))


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    with Session(engine) as s:
        yield s


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch, database_url: str) -> Callable[..., None]:
    """Set MOESCOPE_* variables for the app under test (and clear the settings cache)."""

    def apply(**values: Any) -> None:
        for key, value in values.items():
            monkeypatch.setenv(f"MOESCOPE_{key.upper()}", str(value))
        get_settings.cache_clear()

    apply(database_url=database_url)
    yield apply
    get_settings.cache_clear()


@pytest.fixture
def client(engine: Engine, settings_env: Callable[..., None]) -> Iterator[TestClient]:
    with TestClient(create_app()) as c:
        yield c


@pytest.fixture
def token_for(session: Session) -> Callable[[str], str]:
    """A fresh token of the given scope, committed."""

    def make(scope: str) -> str:
        _, token = tokens.create_token(session, f"test-{scope}-{uuid.uuid4().hex[:6]}", scope)
        session.commit()
        return token

    return make


@pytest.fixture
def auth(token_for: Callable[[str], str]) -> Callable[[str], dict[str, str]]:
    return lambda scope: {"Authorization": f"Bearer {token_for(scope)}"}


_REFERENCE: dict[str, Any] = json.loads(reference_report_text())


@pytest.fixture
def reference() -> dict[str, Any]:
    """The GB300 reference report as parsed JSON (a fresh copy: tests may mutate it)."""
    return copy.deepcopy(_REFERENCE)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    url: str
    database_url: str
    process: subprocess.Popen[bytes]
    log: Path

    def token(self, scope: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "app.cli", "token", "create", f"live-{scope}",
             "--scope", scope, "--database-url", self.database_url],
            check=True, capture_output=True, text=True, cwd=REPO,
        )
        return out.stdout.strip().splitlines()[-1]


def wait_until_up(
    url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server not up after {timeout} s:\n{log.read_text()}")


@contextmanager
def live_server(database_url: str, tmp: Path, *extra_args: str,
                env: dict[str, str] | None = None, port: int | None = None
                ) -> Iterator[LiveServer]:
    """A real ``moescope serve`` process on a free port (or ``port``, to restart one)."""
    port = port or free_port()
    log = tmp / f"server-{port}.log"
    full_env = {**os.environ, "MOESCOPE_DATABASE_URL": database_url, **(env or {})}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port),
             "--log-level", "warning", *extra_args],
            stdout=out, stderr=subprocess.STDOUT, env=full_env, cwd=REPO,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process, log)
        yield LiveServer(url, database_url, process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """A new, empty Postgres database (for live servers, which must see committed rows)."""
    require_postgres()
    name = f"moescope_t_{uuid.uuid4().hex[:12]}"
    admin = make_url(POSTGRES_URL).set(database="postgres")
    with psycopg.connect(libpq_url(admin.render_as_string(False)), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(libpq_url(admin.render_as_string(False)), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
