"""Engines and sessions. One engine per URL; sessions are opened here only: one per request
(``app.api.sessions.SessionDep`` opens it here), one per page render, callback or CLI
command (``session_scope``). FastAPI stays out of this module: the command line imports it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from app.core.config import get_settings


def _connect_args(url: str, timeout_s: float) -> dict[str, Any]:
    if url.startswith("sqlite"):
        # Writers serialise on SQLite: wait for the lock rather than fail at once.
        return {"timeout": 30, "check_same_thread": False}
    if url.startswith("postgresql"):
        return {"connect_timeout": max(1, int(timeout_s))}
    return {}


def make_engine(url: str, *, pool_size: int = 10, connect_timeout_s: float = 5.0) -> Engine:
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if not url.startswith("sqlite"):
        kwargs.update(pool_size=pool_size, max_overflow=pool_size)
    engine = create_engine(url, connect_args=_connect_args(url, connect_timeout_s), **kwargs)
    if url.startswith("sqlite"):
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


@lru_cache
def engine_for(url: str) -> Engine:
    settings = get_settings()
    return make_engine(
        url, pool_size=settings.db_pool_size, connect_timeout_s=settings.db_connect_timeout_s
    )


def get_engine() -> Engine:
    return engine_for(get_settings().database_url)


@lru_cache
def _sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    """A session on the database at ``url`` (the configured one by default); anything left
    uncommitted when it closes is rolled back."""
    with _sessionmaker(engine_for(url) if url else get_engine())() as session:
        yield session


@contextmanager
def transaction(session: Session) -> Iterator[Session]:
    """The one place that commits: what is written inside lands whole when the block ends,
    and nothing of it on any error. Services and repositories never commit."""
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
