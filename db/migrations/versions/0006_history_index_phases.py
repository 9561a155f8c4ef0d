"""ix_cases_case_id_report_id carries the phases (dispatch, experts, combine) as well, so a
history's buckets, which summarise every metric the page draws, still come from the index
alone; and it is unique, replacing uq_cases_report_id_case_id (the same pair, a second
index of 5 KB a report)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 12:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_METRICS = ['layer_ms', 'useful_tf_per_gpu', 'percent_of_peak', 'nvlink_tx_gbps',
            'nvlink_rx_gbps']
_PHASES = ['phase_dispatch_ms', 'phase_experts_ms', 'phase_combine_ms']


def upgrade() -> None:
    with op.batch_alter_table('cases', schema=None) as batch_op:
        batch_op.drop_index('ix_cases_case_id_report_id')
        batch_op.drop_constraint('uq_cases_report_id_case_id', type_='unique')
        batch_op.create_index('ix_cases_case_id_report_id', ['case_id', 'report_id'],
                              unique=True, postgresql_include=_METRICS + _PHASES)


def downgrade() -> None:
    with op.batch_alter_table('cases', schema=None) as batch_op:
        batch_op.drop_index('ix_cases_case_id_report_id')
        batch_op.create_unique_constraint('uq_cases_report_id_case_id',
                                          ['report_id', 'case_id'])
        batch_op.create_index('ix_cases_case_id_report_id', ['case_id', 'report_id'],
                              unique=False, postgresql_include=_METRICS)
