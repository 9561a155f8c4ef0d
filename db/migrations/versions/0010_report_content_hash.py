"""reports.current_sha256: the canonical hash of report.json as it stands now (appends
change it), indexed, so a streamed report posted whole afterwards is found by one index
probe instead of by decoding every stored report of its day. Stored reports get theirs
from their body.

Revision ID: 0010
Revises: 0008
Create Date: 2026-12-04 05:40:00
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = '0010'
down_revision: str | None = '0009_alerts'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# SQLite's batch mode rebuilds the table: without this it would start reusing the ids of
# deleted reports.
_KEEP = {"sqlite_autoincrement": True}

_reports = sa.table('reports', sa.column('id', sa.Integer()), sa.column('body', sa.LargeBinary()),
                    sa.column('current_sha256', sa.String()))


def _canonical_sha256(value: Any) -> str:
    # app.services.reports.canonical_sha256 as of this revision.
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _backfill() -> None:
    connection = op.get_bind()
    ids = connection.execute(sa.select(_reports.c.id)).scalars().all()
    for report_id in ids:
        body = connection.execute(
            sa.select(_reports.c.body).where(_reports.c.id == report_id)).scalar_one()
        sha = _canonical_sha256(json.loads(zlib.decompress(body)))
        connection.execute(_reports.update().where(_reports.c.id == report_id)
                           .values(current_sha256=sha))


def upgrade() -> None:
    with op.batch_alter_table('reports', schema=None, table_kwargs=_KEEP) as batch_op:
        batch_op.add_column(sa.Column('current_sha256', sa.String(length=64), nullable=True))
    _backfill()
    with op.batch_alter_table('reports', schema=None, table_kwargs=_KEEP) as batch_op:
        batch_op.alter_column('current_sha256', existing_type=sa.String(length=64),
                              nullable=False)
        batch_op.create_index('ix_reports_current_sha256', ['current_sha256'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('reports', schema=None, table_kwargs=_KEEP) as batch_op:
        batch_op.drop_index('ix_reports_current_sha256')
        batch_op.drop_column('current_sha256')
