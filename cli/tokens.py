"""``moescope token create|list|revoke``: API tokens, shown once, stored as hashes."""

from __future__ import annotations

import argparse
import sys

from sqlalchemy.orm import Session

from app.core.db import session_scope, transaction
from app.core.errors import NotFound
from app.services import tokens
from cli.database import migrated_database_url
from cli.errors import CommandError


def run(args: argparse.Namespace) -> int:
    with session_scope(migrated_database_url(args)) as session:
        if args.token_command == "create":
            _create(session, args.name, args.scope)
        elif args.token_command == "list":
            _list(session)
        else:
            _revoke(session, args.ident)
    return 0


def _create(session: Session, name: str, scope: str) -> None:
    with transaction(session):
        row, token = tokens.create_token(session, name, scope)
    print(f"created token {row.id} ({row.name}, scope {row.scope}); it is shown once:",
          file=sys.stderr)
    print(token)


def _list(session: Session) -> None:
    print(f"{'id':>4}  {'name':<24} {'scope':<7} {'prefix':<11} {'created':<20} revoked")
    for row in tokens.list_tokens(session):
        revoked = row.revoked_at.isoformat(timespec="seconds") if row.revoked_at else "-"
        print(f"{row.id:>4}  {row.name:<24} {row.scope:<7} {row.prefix:<11} "
              f"{row.created_at.isoformat(timespec='seconds'):<20} {revoked}")


def _revoke(session: Session, ident: str) -> None:
    try:
        with transaction(session):
            revoked = tokens.revoke_token(session, ident)
    except NotFound as exc:
        raise CommandError(str(exc.detail)) from exc
    for row in revoked:
        print(f"revoked token {row.id} ({row.name})")
