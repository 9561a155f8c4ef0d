"""All queries on API tokens. Only a token's sha256 is stored; the token is shown once."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.errors import NotFound
from app.core.scopes import SCOPES
from app.models import TokenRow, utcnow

TOKEN_PREFIX = "msc_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(session: Session, name: str, scope: str) -> tuple[TokenRow, str]:
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = TokenRow(name=name, scope=scope, token_sha256=hash_token(token), prefix=token[:10])
    session.add(row)
    session.flush()
    return row, token


def list_tokens(session: Session) -> list[TokenRow]:
    return list(session.execute(select(TokenRow).order_by(TokenRow.id)).scalars().all())


def revoke_token(session: Session, ident: str) -> list[TokenRow]:
    """Revoke by numeric id or by name; returns what was revoked."""
    query = select(TokenRow).where(TokenRow.revoked_at.is_(None))
    if ident.isdigit():
        query = query.where(TokenRow.id == int(ident))
    else:
        query = query.where(TokenRow.name == ident)
    rows = list(session.execute(query).scalars().all())
    if not rows:
        raise NotFound(f"no active token with id or name {ident!r}")
    for row in rows:
        row.revoked_at = utcnow()
    session.flush()
    return rows


def find_active(session: Session, token: str) -> TokenRow | None:
    digest = hash_token(token)
    row = session.execute(
        select(TokenRow).where(TokenRow.token_sha256 == digest)
    ).scalar_one_or_none()
    # The lookup is by digest already; the constant-time compare keeps the final
    # equality check free of early exits all the same.
    if row is None or not hmac.compare_digest(row.token_sha256, digest):
        return None
    if row.revoked_at is not None:
        return None
    return row


def scope_allows(granted: str, needed: str) -> bool:
    """admin > ingest > read."""
    return SCOPES.index(granted) >= SCOPES.index(needed)
