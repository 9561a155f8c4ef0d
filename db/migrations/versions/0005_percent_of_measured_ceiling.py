"""cases.percent_of_measured_ceiling: useful throughput against the run's own measured
grouped-GEMM ceiling (meta.measuredCeilings), beside % of the datasheet peak

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 08:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
# The lead re-chains this after 0003 and 0004 (other branches) when merging.
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable, no backfill: reports stored before had no measured ceilings.
    with op.batch_alter_table('cases', schema=None) as batch_op:
        batch_op.add_column(sa.Column('percent_of_measured_ceiling', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('cases', schema=None) as batch_op:
        batch_op.drop_column('percent_of_measured_ceiling')
