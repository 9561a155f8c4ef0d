"""cases: the busiest rank's utilisations, limiter and % of measured ceiling; hot_rank_factor,
imbalance_loss_percent; the communication share counts quantize; the above_ceiling caveat

The layer waits for the rank with the most received rows, so the utilisations are that
rank's (DESIGN.md "Derived metrics"). Stored reports are derived again from their bodies.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04 02:40:00
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NEW = (('hot_rank_factor', sa.Float()), ('imbalance_loss_percent', sa.Float()))
_CHANGED = ('compute_util_percent', 'hbm_util_percent', 'limiter',
            'percent_of_measured_ceiling', 'communication_share_percent')

# ingest.derived as of this revision, frozen here: a later change of a rule comes with its
# own migration, and this one must keep computing these values.
_LATENCY = 25.0
_ELEMENT_BYTES = {"bf16": Fraction(2), "mxfp8": Fraction(33, 32), "nvfp4": Fraction(9, 16)}
_ABOVE_CEILING = "above_ceiling"
# Where above_ceiling sits among a case's caveats (ingest.derived's order): after these.
_BEFORE = ("numerical_not_accepted", "graph_not_accepted", "oom", "allocation_retries",
           "recompute", "noisy_windows", "hot_rank", "no_ep_traffic", "no_peak",
           "nvlink_not_measured", "above_peak", "emulated")


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _percent(value: float | None, peak: float | None) -> float | None:
    if value is None or not peak:
        return None
    return _finite(value / peak * 100.0)


def _times(value: float | None, factor: float | None) -> float | None:
    return None if value is None or factor is None else _finite(value * factor)


def _hot(case: dict[str, Any]) -> float | None:
    rows = case.get("receiveRows") or []
    if not rows:
        return None
    mean = sum(rows) / len(rows)
    return max(rows) / mean if mean else None


def _ceiling(meta: dict[str, Any], case: dict[str, Any]) -> float | None:
    ceilings, shape = meta.get("measuredCeilings"), meta["shape"]
    rows = case.get("receiveRows") or []
    if not ceilings or not rows or shape["E"] % case["ep"]:
        return None
    local = shape["E"] // case["ep"]
    per_expert = -(-max(rows) // local)
    for c in ceilings.get("grouped") or []:
        if (c["precision"], c["experts"], c["rowsPerExpert"], c["D"], c["F"]) == (
                case["precision"], local, per_expert, shape["D"], case["F"]) \
                and c.get("pipeline") in (None, case["pipeline"]):
            return float(c["tf"])
    return None


def _hbm_util(meta: dict[str, Any], case: dict[str, Any]) -> float | None:
    element, shape = _ELEMENT_BYTES.get(case["precision"]), meta["shape"]
    rows_list = case.get("receiveRows") or []
    if element is None or not rows_list or shape["E"] % case["ep"]:
        return None
    rows = max(rows_list)
    d, f = shape["D"], case["F"]
    weights = (shape["E"] // case["ep"]) * 3 * d * f * element if rows > 0 else 0
    forward = shape["T"] * d * 2 + rows * (2 * d + 4 * f) + weights + shape["T"] * shape["K"] * 4
    total = float(forward) * (3 if case["mode"] == "training" else 1)
    return _percent(total / (case["layerMS"] * 1e-3) / 1e9, meta.get("theoreticalHBMGBps"))


def _limiter(compute: float | None, hbm: float | None, nvlink: float | None) -> str | None:
    known = [(u, roof) for roof, u in (("compute", compute), ("hbm", hbm), ("nvlink", nvlink))
             if u is not None]
    if not known:
        return None
    best, roof = max(known, key=lambda pair: pair[0])
    return roof if best >= _LATENCY else "latency"


def _share(case: dict[str, Any], with_quantize: bool) -> float | None:
    phases = case.get("phaseMS")
    if not isinstance(phases, dict):
        return None
    total = phases["dispatch"] + phases["experts"] + phases["combine"] + (
        phases.get("route") or 0.0)
    if with_quantize:
        total += phases.get("quantize") or 0.0
    return _finite((phases["dispatch"] + phases["combine"]) / total * 100.0)


def _new(meta: dict[str, Any], case: dict[str, Any], row: Any) -> dict[str, Any]:
    hot = _hot(case)
    compute = _times(row.percent_of_peak, hot)
    hbm = _hbm_util(meta, case)
    ceiling = None if case.get("emulated") else _ceiling(meta, case)
    return {"hot_rank_factor": hot, "compute_util_percent": compute, "hbm_util_percent": hbm,
            "limiter": _limiter(compute, hbm, row.nvlink_util_percent),
            "imbalance_loss_percent": None if not hot else (1.0 - 1.0 / hot) * 100.0,
            "percent_of_measured_ceiling": _times(
                _percent(case["usefulTFPerGPU"], ceiling), hot),
            "communication_share_percent": _share(case, True)}


def _old(meta: dict[str, Any], case: dict[str, Any], row: Any) -> dict[str, Any]:
    # Revisions 0003-0006: the mean rank's figures.
    return {"compute_util_percent": row.percent_of_peak, "hbm_util_percent": row.hbm_percent_of_peak,
            "limiter": _limiter(row.percent_of_peak, row.hbm_percent_of_peak,
                                row.nvlink_util_percent),
            "percent_of_measured_ceiling": _percent(case["usefulTFPerGPU"],
                                                    _ceiling(meta, case)),
            "communication_share_percent": _share(case, False)}


_reports = sa.table('reports', sa.column('id', sa.Integer()), sa.column('body', sa.LargeBinary()))
_cases = sa.table('cases', sa.column('id', sa.Integer()), sa.column('report_id', sa.Integer()),
                  sa.column('position', sa.Integer()),
                  sa.column('percent_of_peak', sa.Float()),
                  sa.column('hbm_percent_of_peak', sa.Float()),
                  sa.column('nvlink_util_percent', sa.Float()),
                  *(sa.column(name, kind) for name, kind in _NEW),
                  *(sa.column(name) for name in _CHANGED))
_caveats = sa.table('caveats', sa.column('id', sa.Integer()), sa.column('case_pk', sa.Integer()),
                    sa.column('code', sa.String(50)), sa.column('message', sa.Text()))


def _set_above_ceiling(bind: sa.Connection, case_pk: int, percent: float | None) -> None:
    """The case's caveats with above_ceiling where ``percent`` is over 100, in
    ingest.derived's order (ids ascend), or without it."""
    stored = [tuple(r) for r in bind.execute(
        sa.select(_caveats.c.code, _caveats.c.message).where(_caveats.c.case_pk == case_pk)
        .order_by(_caveats.c.id)).all()]
    kept = [c for c in stored if c[0] != _ABOVE_CEILING]
    wanted = kept
    if percent is not None and percent > 100.0:
        message = (f"the busiest rank's useful rate is {percent:.0f} % of the grouped-GEMM "
                   f"ceiling the run measured at its shape: the ceiling or the timing is wrong")
        before = [c for c in kept if c[0] in _BEFORE]
        wanted = [*before, (_ABOVE_CEILING, message), *[c for c in kept if c[0] not in _BEFORE]]
    if wanted == stored:
        return
    bind.execute(_caveats.delete().where(_caveats.c.case_pk == case_pk))
    if wanted:
        bind.execute(_caveats.insert(), [{"case_pk": case_pk, "code": code, "message": message}
                                         for code, message in wanted])


def _rederive(rule: Any, caveats: bool) -> None:
    bind = op.get_bind()
    for report_id, body in bind.execute(sa.select(_reports.c.id, _reports.c.body)).all():
        document = json.loads(zlib.decompress(body))
        meta, by_position = document["meta"], document["cases"]
        for row in bind.execute(sa.select(_cases).where(_cases.c.report_id == report_id)).all():
            values = rule(meta, by_position[row.position], row)
            bind.execute(_cases.update().where(_cases.c.id == row.id).values(**values))
            _set_above_ceiling(bind, row.id,
                               values["percent_of_measured_ceiling"] if caveats else None)


def upgrade() -> None:
    with op.batch_alter_table('cases', schema=None) as batch_op:
        for name, kind in _NEW:
            batch_op.add_column(sa.Column(name, kind, nullable=True))
    _rederive(_new, caveats=True)


def downgrade() -> None:
    _rederive(_old, caveats=False)
    with op.batch_alter_table('cases', schema=None) as batch_op:
        for name, _ in reversed(_NEW):
            batch_op.drop_column(name)
