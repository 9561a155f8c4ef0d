"""history at scale: one compressed body per report, indexes for series lookups, marks

reports.body (report.json's bytes, zlib) replaces each case's payload copy and the array
columns that repeated it (windows, receive_rows, saved_bytes, recompute); cases keep the
combined windows' min and max for history's band, and phaseMS as three columns. reports.provenance keys meta.host.
Indexes: cases (case_id, report_id), reports (gpu, series, date); on Postgres they carry
the columns history reads (INCLUDE). report_marks: an admin's
step and outlier marks. Both directions convert the stored reports.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 08:40:00
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEEP = {"sqlite_autoincrement": True}
_PHASES = ("dispatch", "experts", "combine")
_ARRAYS = ("windows", "receive_rows", "saved_bytes", "recompute")
# wire name of each array column, and what ingest stored when the case left it out.
_WIRE = {"windows": ("windows", None), "receive_rows": ("receiveRows", []),
         "saved_bytes": ("savedBytes", []), "recompute": ("recompute", [])}

_reports = sa.table('reports', sa.column('id', sa.Integer()), sa.column('meta', sa.JSON()),
                    sa.column('extra', sa.JSON()), sa.column('body', sa.LargeBinary()),
                    sa.column('provenance', sa.String(16)))
_cases = sa.table('cases', sa.column('id', sa.Integer()), sa.column('report_id', sa.Integer()),
                  sa.column('position', sa.Integer()), sa.column('case_id', sa.String(300)),
                  sa.column('payload', sa.JSON()), sa.column('window_min_ms', sa.Float()),
                  sa.column('window_max_ms', sa.Float()),
                  *[sa.column(f'phase_{name}_ms', sa.Float()) for name in ('dispatch', 'experts',
                                                                            'combine')],
                  *[sa.column(name, sa.JSON()) for name in _ARRAYS])


# app.report_body and ingest.provenance as of this revision, frozen here: a later change
# comes with its own migration, and this one must keep computing these values.
def _body(meta: Any, cases: list[Any], extra: Any) -> bytes:
    document = {"meta": meta, "cases": cases, **(extra or {})}
    text = json.dumps(document, ensure_ascii=False, allow_nan=False)
    return zlib.compress(text.encode("utf-8"), 6)


_HOST_FIELDS = ("driver", "cuda", "torch", "nccl", "python", "hostname", "worldSize",
                "gpuCount", "backend")


def _provenance(meta: Any) -> str:
    host = meta.get("host") if isinstance(meta, dict) else None
    fields = ({key: str(host[key]) for key in _HOST_FIELDS if host.get(key) is not None}
              if isinstance(host, dict) else {})
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def upgrade() -> None:
    with op.batch_alter_table('reports', schema=None, table_kwargs=_KEEP) as batch_op:
        batch_op.add_column(sa.Column('provenance', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('body', sa.LargeBinary(), nullable=True))
    with op.batch_alter_table('cases', schema=None) as batch_op:
        batch_op.add_column(sa.Column('window_min_ms', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('window_max_ms', sa.Float(), nullable=True))
        for name in _PHASES:
            batch_op.add_column(sa.Column(f'phase_{name}_ms', sa.Float(), nullable=True))

    bind = op.get_bind()
    report_ids = bind.execute(sa.select(_reports.c.id).order_by(_reports.c.id)).scalars().all()
    for report_id in report_ids:
        meta, extra = bind.execute(sa.select(_reports.c.meta, _reports.c.extra)
                                   .where(_reports.c.id == report_id)).one()
        rows = bind.execute(sa.select(_cases.c.id, _cases.c.payload)
                            .where(_cases.c.report_id == report_id)
                            .order_by(_cases.c.position)).all()
        bind.execute(_reports.update().where(_reports.c.id == report_id).values(
            body=_body(meta, [payload for _, payload in rows], extra),
            provenance=_provenance(meta)))
        for pk, payload in rows:
            combined = payload["windows"]["combined"]
            phases = payload.get("phaseMS") or {}
            bind.execute(_cases.update().where(_cases.c.id == pk).values(
                window_min_ms=min(combined), window_max_ms=max(combined),
                **{f'phase_{name}_ms': phases.get(name) for name in _PHASES}))

    with op.batch_alter_table('reports', schema=None, table_kwargs=_KEEP) as batch_op:
        batch_op.alter_column('provenance', existing_type=sa.String(length=16), nullable=False)
        batch_op.alter_column('body', existing_type=sa.LargeBinary(), nullable=False)
        batch_op.create_index('ix_reports_gpu_series_date', ['gpu', 'series', 'date'],
                              unique=False)
        batch_op.drop_index('ix_reports_series_date')
        batch_op.create_index('ix_reports_series_date', ['series', 'date', 'created_at', 'id'],
                              unique=False, postgresql_include=['provenance'])
    with op.batch_alter_table('cases', schema=None) as batch_op:
        batch_op.drop_column('payload')
        for name in _ARRAYS:
            batch_op.drop_column(name)
        batch_op.create_index('ix_cases_case_id_report_id', ['case_id', 'report_id'],
                              unique=False, postgresql_include=[
                                  'layer_ms', 'useful_tf_per_gpu', 'percent_of_peak',
                                  'nvlink_tx_gbps', 'nvlink_rx_gbps'])

    op.create_table('report_marks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('report_id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("kind IN ('step', 'outlier')", name=op.f('ck_report_marks_kind_known')),
    sa.ForeignKeyConstraint(['report_id'], ['reports.id'],
                            name=op.f('fk_report_marks_report_id_reports'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_report_marks')),
    sa.UniqueConstraint('report_id', 'kind', name='uq_report_marks_report_id_kind')
    )


def downgrade() -> None:
    op.drop_table('report_marks')
    with op.batch_alter_table('cases', schema=None) as batch_op:
        batch_op.drop_index('ix_cases_case_id_report_id')
        for name in _ARRAYS:
            batch_op.add_column(sa.Column(name, sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('payload', sa.JSON(), nullable=True))

    bind = op.get_bind()
    report_ids = bind.execute(sa.select(_reports.c.id).order_by(_reports.c.id)).scalars().all()
    for report_id in report_ids:
        body = bind.execute(sa.select(_reports.c.body)
                            .where(_reports.c.id == report_id)).scalar_one()
        posted = {case["id"]: case for case in json.loads(zlib.decompress(body))["cases"]}
        rows = bind.execute(sa.select(_cases.c.id, _cases.c.case_id)
                            .where(_cases.c.report_id == report_id)).all()
        for pk, case_id in rows:
            case = posted[case_id]
            bind.execute(_cases.update().where(_cases.c.id == pk).values(
                payload=case,
                **{name: case.get(wire, missing) for name, (wire, missing) in _WIRE.items()}))

    with op.batch_alter_table('cases', schema=None) as batch_op:
        for name in _PHASES:
            batch_op.drop_column(f'phase_{name}_ms')
        batch_op.drop_column('window_max_ms')
        batch_op.drop_column('window_min_ms')
        for name in ('payload', *_ARRAYS):
            batch_op.alter_column(name, existing_type=sa.JSON(), nullable=False)
    with op.batch_alter_table('reports', schema=None, table_kwargs=_KEEP) as batch_op:
        batch_op.drop_index('ix_reports_series_date')
        batch_op.create_index('ix_reports_series_date', ['series', 'date', 'created_at', 'id'],
                              unique=False)
        batch_op.drop_index('ix_reports_gpu_series_date')
        batch_op.drop_column('body')
        batch_op.drop_column('provenance')
