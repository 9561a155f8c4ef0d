"""A request's session, as FastAPI dependencies (``app.core.db`` opens it). Apart from
``app.core.db`` so that the command line, which opens sessions too, never imports FastAPI."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends
from sqlalchemy.orm import Session

from app.core.db import session_scope, transaction


def get_session() -> Iterator[Session]:
    """A session for one request; anything left uncommitted when it ends is rolled back."""
    with session_scope() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def _request_transaction(session: SessionDep) -> Iterator[Session]:
    with transaction(session):
        yield session


# A writing route's session: committed when the route returns, rolled back when it raises.
# scope="function": the commit runs before the answer is sent (by default FastAPI sends it
# first), so a commit that fails is never answered as a success.
TransactionDep = Annotated[Session, Depends(_request_transaction, scope="function")]
