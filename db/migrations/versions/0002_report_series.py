"""reports.series: the series (GPU name and shape) its cases continue

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03 02:35:00
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# SQLite rebuilds the table in batch mode; without this its rebuilt copy would lose
# AUTOINCREMENT and hand a deleted report's id to the next one (see app.models).
_KEEP = {"sqlite_autoincrement": True}


def _series(meta: dict[str, Any]) -> str:
    # ingest.series.series_context as of this revision, frozen here: a later change of the
    # identity comes with its own migration, and this one must keep computing this value.
    shape = meta["shape"]
    fields = {"gpu": meta["gpu"], "T": shape["T"], "D": shape["D"], "E": shape["E"],
              "K": shape["K"]}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def upgrade() -> None:
    with op.batch_alter_table('reports', schema=None, table_kwargs=_KEEP) as batch_op:
        batch_op.add_column(sa.Column('series', sa.String(length=16), nullable=True))
    reports = sa.table('reports', sa.column('id', sa.Integer()), sa.column('meta', sa.JSON()),
                       sa.column('series', sa.String(16)))
    bind = op.get_bind()
    for report_id, meta in bind.execute(sa.select(reports.c.id, reports.c.meta)).all():
        bind.execute(reports.update().where(reports.c.id == report_id)
                     .values(series=_series(meta)))
    with op.batch_alter_table('reports', schema=None, table_kwargs=_KEEP) as batch_op:
        batch_op.alter_column('series', existing_type=sa.String(length=16), nullable=False)
        batch_op.create_index('ix_reports_series_date', ['series', 'date', 'created_at', 'id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('reports', schema=None, table_kwargs=_KEEP) as batch_op:
        batch_op.drop_index('ix_reports_series_date')
        batch_op.drop_column('series')
