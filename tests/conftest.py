"""Fixtures: every database test runs on SQLite and on a real Postgres.

Postgres comes from MOESCOPE_TEST_POSTGRES_URL. When it is unreachable the Postgres
half is skipped on a laptop, and fails the run when CI=true.
"""

from __future__ import annotations

import copy
import json
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import browser
import psycopg
import pytest
from fastapi.testclient import TestClient
from gloo_ranks import GlooRanks
from live import (
    ServerProcess,
    free_port,
    libpq_url,
    scratch_postgres_database,
    serve_process,
)
from selenium.webdriver.remote.webdriver import WebDriver
from shared_server import SharedServer
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from app.core.config import get_settings
from app.core.db import engine_for
from app.main import create_app
from app.models import Base
from app.repository import tokens
from db.migrate import upgrade
from ingest.reference import reference_report_text

POSTGRES_URL = os.environ.get(
    "MOESCOPE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def postgres_reachable() -> str | None:
    """None when reachable, else the reason."""
    try:
        with psycopg.connect(libpq_url(POSTGRES_URL), connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"Postgres at {POSTGRES_URL} unreachable: {exc}"


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


# A live server is ``live.serve_process`` (tests/live.py), the same one the benchmarks start.
LiveServer = ServerProcess


@contextmanager
def live_server(database_url: str, tmp: Path, *extra_args: str,
                env: dict[str, str] | None = None, port: int | None = None
                ) -> Iterator[LiveServer]:
    """A real ``moescope serve`` process on a free port (or ``port``, to restart one)."""
    port = port or free_port()
    with serve_process(database_url, tmp / f"server-{port}.log", *extra_args, env=env,
                       port=port) as server:
        yield server


@contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """A new, empty Postgres database (for live servers, which must see committed rows)."""
    require_postgres()
    with scratch_postgres_database(POSTGRES_URL) as url:
        yield url


@pytest.fixture(scope="session")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    """One live server for every browser test module of the session, on a Postgres
    database of its own (tests/shared_server.py says how modules keep out of each other's
    rows): started and migrated once, not once per module."""
    browser.require_chromium(IN_CI)
    with fresh_postgres_database() as url, \
            live_server(url, tmp_path_factory.mktemp("shared-live")) as live:
        with Session(engine_for(url)) as session:
            _, ingest_token = tokens.create_token(session, "browser-ingest", "ingest")
            _, admin_token = tokens.create_token(session, "browser-admin", "admin")
            session.commit()
        engine_for(url).dispose()
        yield SharedServer(live, ingest_token, admin_token)


@pytest.fixture(scope="session")
def chromium() -> Iterator[WebDriver]:
    """One headless Chromium for every browser test of the session (tests/browser.py):
    each module takes it with ``browser.take`` at its window size."""
    browser.require_chromium(IN_CI)
    driver = browser.start_chromium("1440,1100", browser.LOGS, browser.NETWORK_CUT)
    driver.set_page_load_timeout(browser.PAGE_LOAD_S)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def gloo_pair() -> Iterator[GlooRanks]:
    """Two gloo ranks shared by the session's tests that run code on every rank
    (tests/gloo_ranks.py: started at the first task, ended with the session)."""
    with GlooRanks(2) as ranks:
        yield ranks


@pytest.fixture(scope="session")
def runner_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str]]:
    """One live server (SQLite) and an ingest token for the runner's end-to-end tests
    (a server start-up and a token cost ~5 s): each test reads back its own report by
    its run id, and none stops or empties this server."""
    tmp = tmp_path_factory.mktemp("runner-server")
    with live_server(f"sqlite:///{tmp / 'moescope.db'}", tmp) as live:
        yield live, live.token("ingest")
