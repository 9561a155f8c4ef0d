"""API tokens for ``moescope token``: create (the token shown once), list, revoke."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.models import TokenRow
from app.repository import tokens as tokens_repo


def create_token(session: Session, name: str, scope: str) -> tuple[TokenRow, str]:
    """The new row and the token itself, which is stored only as its hash."""
    return tokens_repo.create_token(session, name, scope)


def list_tokens(session: Session) -> list[TokenRow]:
    return tokens_repo.list_tokens(session)


def revoke_token(session: Session, ident: str) -> list[TokenRow]:
    """Revoke by numeric id or by name; NotFound when no active token matches."""
    return tokens_repo.revoke_token(session, ident)
