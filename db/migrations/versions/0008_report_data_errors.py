"""reports.data_error_count: the cases caveated above_peak, numerical_not_accepted or failed;
best_percent_of_peak leaves them out (a data error is no one's best)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 04:05:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# ingest.ties.NEVER_BEST as of this revision.
_NEVER_BEST = ('above_peak', 'failed', 'numerical_not_accepted')

_reports = sa.table('reports', sa.column('id', sa.Integer()),
                    sa.column('best_percent_of_peak', sa.Float()),
                    sa.column('data_error_count', sa.Integer()))
_cases = sa.table('cases', sa.column('id', sa.Integer()), sa.column('report_id', sa.Integer()),
                  sa.column('percent_of_peak', sa.Float()))
_caveats = sa.table('caveats', sa.column('case_pk', sa.Integer()), sa.column('code', sa.String()))


def _refresh(leave_out_errors: bool) -> None:
    erroneous = sa.exists().where(_caveats.c.case_pk == _cases.c.id,
                                  _caveats.c.code.in_(_NEVER_BEST))
    errors = (sa.select(sa.func.count(_cases.c.id)).where(
        _cases.c.report_id == _reports.c.id, erroneous).scalar_subquery())
    best = (sa.select(sa.func.max(_cases.c.percent_of_peak)).where(
        _cases.c.report_id == _reports.c.id, *([~erroneous] if leave_out_errors else []))
        .scalar_subquery())
    values = {"best_percent_of_peak": best}
    if leave_out_errors:
        values["data_error_count"] = errors
    op.get_bind().execute(_reports.update().values(**values))


def upgrade() -> None:
    with op.batch_alter_table('reports', schema=None) as batch_op:
        batch_op.add_column(sa.Column('data_error_count', sa.Integer(), nullable=False,
                                      server_default='0'))
    _refresh(leave_out_errors=True)


def downgrade() -> None:
    _refresh(leave_out_errors=False)
    with op.batch_alter_table('reports', schema=None) as batch_op:
        batch_op.drop_column('data_error_count')
