"""cases: utilisations, limiter and communication share; hot_rank and no_ep_traffic
replace local_only_payload

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 08:30:00
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ('compute_util_percent', sa.Float()),
    ('hbm_util_percent', sa.Float()),
    ('nvlink_util_percent', sa.Float()),
    ('limiter', sa.String(length=20)),
    ('communication_share_percent', sa.Float()),
)

# ingest.derived as of this revision, frozen here: a later change of a rule comes with its
# own migration, and this one must keep computing these values.
_LATENCY = 25.0
_HOT = 2.0


def _percent(value: float | None, peak: float | None) -> float | None:
    if value is None or not peak:
        return None
    ratio = value / peak * 100.0
    return ratio if ratio not in (float("inf"), float("-inf")) else None


def _derived(meta: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    peak = (meta.get("theoreticalTFPerGPU") or {}).get(case["precision"])
    compute = None if case.get("emulated") else _percent(case["usefulTFPerGPU"], peak)
    hbm = _percent(case.get("analyticalHBMGBps"), meta.get("theoreticalHBMGBps"))
    links = [v for v in (case.get("nvlinkMaxTXGBps"), case.get("nvlinkMaxRXGBps"))
             if v is not None]
    nvlink = _percent(max(links) if links else None,
                      meta.get("theoreticalNVLinkGBpsPerDirection"))
    known = [(u, roof) for roof, u in (("compute", compute), ("hbm", hbm), ("nvlink", nvlink))
             if u is not None]
    limiter = None
    if known:
        best, roof = max(known, key=lambda pair: pair[0])
        limiter = roof if best >= _LATENCY else "latency"
    share = None
    phases = case.get("phaseMS")
    if isinstance(phases, dict):
        total = phases["dispatch"] + phases["experts"] + phases["combine"] + (
            phases.get("route") or 0.0)
        share = (phases["dispatch"] + phases["combine"]) / total * 100.0
    return {"compute_util_percent": compute, "hbm_util_percent": hbm,
            "nvlink_util_percent": nvlink, "limiter": limiter,
            "communication_share_percent": share}


def _traffic_caveats(case: dict[str, Any]) -> list[tuple[str, str]]:
    rows = case.get("receiveRows") or []
    mean = sum(rows) / len(rows) if rows else 0
    out = []
    if mean and max(rows) / mean >= _HOT:
        factor = max(rows) / mean
        out.append(("hot_rank",
                    f"the busiest rank receives {factor:.1f} x the mean rows: averaged "
                    f"bandwidth understates the busiest rank's link by {factor:.1f} x"))
    if case["ep"] > 1 and case.get("nvlinkMaxTXGBps") == 0 and case.get("nvlinkMaxRXGBps") == 0:
        out.append(("no_ep_traffic",
                    "no rank sent a row to another: the case measured no EP traffic"))
    return out


def _old_caveats(case: dict[str, Any]) -> list[tuple[str, str]]:
    # The rule of revisions 0001-0002, for the way down.
    if case["ep"] > 1 and case.get("logicalForwardPayloadBytesRank0") == 0:
        return [("local_only_payload",
                 "every routed row stayed on its rank: no EP traffic measured")]
    return []


# Where the traffic caveats sit among a case's caveats (ingest.derived emits them in this
# order): codes before them, then them, then the rest.
_BEFORE = ("numerical_not_accepted", "graph_not_accepted", "oom", "allocation_retries",
           "recompute", "noisy_windows")
_TRAFFIC = ("local_only_payload", "hot_rank", "no_ep_traffic")

_reports = sa.table('reports', sa.column('id', sa.Integer()), sa.column('meta', sa.JSON()))
_cases = sa.table('cases', sa.column('id', sa.Integer()), sa.column('report_id', sa.Integer()),
                  sa.column('payload', sa.JSON()),
                  *(sa.column(name, kind) for name, kind in _COLUMNS))
_caveats = sa.table('caveats', sa.column('id', sa.Integer()), sa.column('case_pk', sa.Integer()),
                    sa.column('code', sa.String(50)), sa.column('message', sa.Text()))


def _rewrite_caveats(bind: sa.Connection, case_pk: int,
                     traffic: list[tuple[str, str]]) -> None:
    """Replace the case's traffic caveats, keeping every caveat's order (ids ascend)."""
    stored = bind.execute(sa.select(_caveats.c.code, _caveats.c.message)
                          .where(_caveats.c.case_pk == case_pk)
                          .order_by(_caveats.c.id)).all()
    kept = [(code, message) for code, message in stored if code not in _TRAFFIC]
    before = [c for c in kept if c[0] in _BEFORE]
    after = [c for c in kept if c[0] not in _BEFORE]
    wanted = [*before, *traffic, *after]
    if wanted == [tuple(row) for row in stored]:
        return
    bind.execute(_caveats.delete().where(_caveats.c.case_pk == case_pk))
    if wanted:
        bind.execute(_caveats.insert(), [{"case_pk": case_pk, "code": code, "message": message}
                                         for code, message in wanted])


def upgrade() -> None:
    with op.batch_alter_table('cases', schema=None) as batch_op:
        for name, kind in _COLUMNS:
            batch_op.add_column(sa.Column(name, kind, nullable=True))
    bind = op.get_bind()
    for report_id, meta in bind.execute(sa.select(_reports.c.id, _reports.c.meta)).all():
        for case_pk, payload in bind.execute(
            sa.select(_cases.c.id, _cases.c.payload).where(_cases.c.report_id == report_id)
        ).all():
            bind.execute(_cases.update().where(_cases.c.id == case_pk)
                         .values(**_derived(meta, payload)))
            _rewrite_caveats(bind, case_pk, _traffic_caveats(payload))


def downgrade() -> None:
    bind = op.get_bind()
    for case_pk, payload in bind.execute(sa.select(_cases.c.id, _cases.c.payload)).all():
        _rewrite_caveats(bind, case_pk, _old_caveats(payload))
    with op.batch_alter_table('cases', schema=None) as batch_op:
        for name, _ in reversed(_COLUMNS):
            batch_op.drop_column(name)
