"""alerts: one change in one report across every case it moved; alert_cases, the cases;
alert_events, each triage (who, when, from, to, reason); webhook_deliveries, each POST of
an opened alert to a webhook

Revision ID: 0009_alerts
Revises: 0008
Create Date: 2026-12-04 05:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009_alerts'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _alerts() -> None:
    op.create_table(
        'alerts',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('report_id', sa.Integer(), nullable=False),
        sa.Column('gpu', sa.String(length=200), nullable=False),
        sa.Column('series', sa.String(length=16), nullable=False),
        sa.Column('metric', sa.String(length=50), nullable=False),
        sa.Column('direction', sa.String(length=20), nullable=False),
        sa.Column('phase', sa.String(length=20), nullable=True),
        sa.Column('change_min_percent', sa.Float(), nullable=False),
        sa.Column('change_max_percent', sa.Float(), nullable=False),
        sa.Column('phase_min_percent', sa.Float(), nullable=True),
        sa.Column('phase_max_percent', sa.Float(), nullable=True),
        sa.Column('gpu_state_changes', sa.JSON(), nullable=False),
        sa.Column('provenance_changes', sa.JSON(), nullable=False),
        sa.Column('last_good_report_id', sa.Integer(), nullable=True),
        sa.Column('first_bad_report_id', sa.Integer(), nullable=False),
        sa.Column('why', sa.Text(), nullable=False),
        sa.Column('state', sa.String(length=20), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("state IN ('new', 'acknowledged', 'invalid', 'fixed')",
                           name=op.f('ck_alerts_state_known')),
        sa.CheckConstraint("direction IN ('regression', 'improvement')",
                           name=op.f('ck_alerts_direction_known')),
        sa.ForeignKeyConstraint(['report_id'], ['reports.id'],
                                name=op.f('fk_alerts_report_id_reports'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['first_bad_report_id'], ['reports.id'],
                                name=op.f('fk_alerts_first_bad_report_id_reports'),
                                ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['last_good_report_id'], ['reports.id'],
                                name=op.f('fk_alerts_last_good_report_id_reports'),
                                ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_alerts')),
        sqlite_autoincrement=True,
    )
    for name, columns in (('ix_alerts_created_at_id', ['created_at', 'id']),
                          ('ix_alerts_report_id', ['report_id']),
                          ('ix_alerts_first_bad_report_id', ['first_bad_report_id']),
                          ('ix_alerts_last_good_report_id', ['last_good_report_id']),
                          ('ix_alerts_series', ['series'])):
        op.create_index(name, 'alerts', columns, unique=False)


def _children() -> None:
    op.create_table(
        'alert_cases',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('alert_id', sa.Integer(), nullable=False),
        sa.Column('case_id', sa.String(length=300), nullable=False),
        sa.Column('change_percent', sa.Float(), nullable=False),
        sa.Column('phase_change_percent', sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(['alert_id'], ['alerts.id'],
                                name=op.f('fk_alert_cases_alert_id_alerts'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_cases')),
    )
    op.create_index('ix_alert_cases_alert_id', 'alert_cases', ['alert_id'], unique=False)
    op.create_index('ix_alert_cases_case_id', 'alert_cases', ['case_id'], unique=False)
    op.create_table(
        'alert_events',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('alert_id', sa.Integer(), nullable=False),
        sa.Column('from_state', sa.String(length=20), nullable=False),
        sa.Column('to_state', sa.String(length=20), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('created_by', sa.String(length=200), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['alert_id'], ['alerts.id'],
                                name=op.f('fk_alert_events_alert_id_alerts'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_events')),
    )
    op.create_index(op.f('ix_alert_events_alert_id'), 'alert_events', ['alert_id'],
                    unique=False)
    op.create_table(
        'webhook_deliveries',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('alert_id', sa.Integer(), nullable=False),
        sa.Column('url', sa.Text(), nullable=False),
        sa.Column('attempt', sa.Integer(), nullable=False),
        sa.Column('status_code', sa.Integer(), nullable=True),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['alert_id'], ['alerts.id'],
                                name=op.f('fk_webhook_deliveries_alert_id_alerts'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_deliveries')),
    )
    op.create_index(op.f('ix_webhook_deliveries_alert_id'), 'webhook_deliveries',
                    ['alert_id'], unique=False)


def upgrade() -> None:
    _alerts()
    _children()


def downgrade() -> None:
    for table in ('webhook_deliveries', 'alert_events', 'alert_cases', 'alerts'):
        op.drop_table(table)
