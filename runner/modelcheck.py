"""``moescope model``: the analytical model per case, and its check against a report.

Pure Python: it reads the report with ``ingest`` and needs no torch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ingest.schema import Case, Report
from ingest.validate import parse_json, validate_report
from runner.model import CAPACITY_FACTOR, CaseModel, model_case
from runner.spec import CaseSpec, Shape

# Fields --check must reproduce, and the tolerance it holds them to.
CHECKED_FIELDS = ("usefulTFPerGPU", "analyticalHBMGBps", "capacityRows", "receiveRows",
                  "inputBytes", "savedBytes")
# Shown, never failed on: the reference payload comes from sampled routing (see model.py).
INFORMATIONAL_FIELDS = ("logicalForwardPayloadBytesRank0",)
TOLERANCE = 1e-9


def load_report(path: Path) -> Report:
    return validate_report(parse_json(path.read_bytes()))


def shape_of(report: Report) -> Shape:
    s = report.meta.shape
    return Shape(T=s.T, D=s.D, E=s.E, K=s.K)


def capacity_factor_of(report: Report) -> int:
    """The runner writes its capacity factor into the meta; other reports used the default."""
    factor = getattr(report.meta, "capacityFactor", None)
    if isinstance(factor, int) and not isinstance(factor, bool) and factor > 0:
        return factor
    return CAPACITY_FACTOR


def spec_of(case: Case) -> CaseSpec:
    return CaseSpec(mode=case.mode, ep=case.ep, precision=case.precision,
                    pipeline=case.pipeline, category=case.category, F=case.F,
                    imbalance=case.imbalance)


def relative_error(model: float, measured: float) -> float:
    if model == measured:
        return 0.0
    return abs(model - measured) / max(abs(model), abs(measured))


def list_error(model: Sequence[int], measured: Sequence[int]) -> float:
    if len(model) != len(measured):
        return float("inf")
    return max((relative_error(a, b) for a, b in zip(model, measured, strict=True)),
               default=0.0)


@dataclass
class FieldCheck:
    name: str
    worst: float = 0.0
    worst_case: str | None = None
    compared: int = 0

    def add(self, case_id: str, error: float) -> None:
        self.compared += 1
        if self.worst_case is None or error > self.worst:
            self.worst, self.worst_case = error, case_id


@dataclass
class CheckResult:
    fields: dict[str, FieldCheck] = field(default_factory=dict)

    def field(self, name: str) -> FieldCheck:
        return self.fields.setdefault(name, FieldCheck(name))

    @property
    def failed(self) -> list[FieldCheck]:
        return [f for name, f in self.fields.items()
                if name in CHECKED_FIELDS and f.worst >= TOLERANCE]


def compare_case(case: Case, model: CaseModel, result: CheckResult) -> None:
    ms = case.layerMS
    result.field("usefulTFPerGPU").add(
        case.id, relative_error(model.useful_tf_per_gpu(ms), case.usefulTFPerGPU))
    if case.analyticalHBMGBps is not None:
        result.field("analyticalHBMGBps").add(
            case.id, relative_error(model.hbm_gbps(ms), case.analyticalHBMGBps))
    if case.capacityRows is not None:
        result.field("capacityRows").add(
            case.id, relative_error(model.capacityRows, case.capacityRows))
    if case.receiveRows:
        result.field("receiveRows").add(case.id, list_error(model.receiveRows, case.receiveRows))
    if case.inputBytes is not None:
        result.field("inputBytes").add(case.id, relative_error(model.inputBytes, case.inputBytes))
    if case.mode == "training" and case.savedBytes:
        result.field("savedBytes").add(case.id, list_error(model.savedBytes, case.savedBytes))
    if case.logicalForwardPayloadBytesRank0 is not None:
        result.field("logicalForwardPayloadBytesRank0").add(case.id, relative_error(
            float(model.logicalForwardPayloadBytesRank0), case.logicalForwardPayloadBytesRank0))


def compare_report(report: Report) -> CheckResult:
    shape, factor = shape_of(report), capacity_factor_of(report)
    result = CheckResult()
    for case in report.cases:
        compare_case(case, model_case(shape, spec_of(case), factor), result)
    return result


def format_check(result: CheckResult) -> list[str]:
    lines = [f"{'field':<34} {'cases':>5} {'worst rel. error':>17}  worst case"]
    for name in (*CHECKED_FIELDS, *INFORMATIONAL_FIELDS):
        f = result.fields.get(name)
        if f is None:
            lines.append(f"{name:<34} {0:>5} {'-':>17}  (not in the report)")
            continue
        verdict = ("" if name in INFORMATIONAL_FIELDS else
                   "  FAIL" if f.worst >= TOLERANCE else "  ok")
        note = "  (informational: sampled routing)" if name in INFORMATIONAL_FIELDS else ""
        lines.append(f"{name:<34} {f.compared:>5} {f.worst:>17.3e}  {f.worst_case}"
                     f"{verdict}{note}")
    return lines


def model_lines(shape: Shape, specs: Iterable[CaseSpec],
                capacity_factor: int = CAPACITY_FACTOR) -> Iterable[str]:
    for spec in specs:
        yield json.dumps(model_case(shape, spec, capacity_factor).as_json(spec.training))


def model_table(shape: Shape, specs: Iterable[CaseSpec],
                capacity_factor: int = CAPACITY_FACTOR) -> Iterable[str]:
    yield (f"{'case':<58} {'useful GFLOP':>13} {'model MB':>10} {'capacity':>9} "
           f"{'max recv':>9}")
    for spec in specs:
        m = model_case(shape, spec, capacity_factor)
        yield (f"{m.id:<58} {m.usefulFlops / 1e9:>13.1f} {float(m.modelBytes) / 1e6:>10.1f} "
               f"{m.capacityRows:>9} {max(m.receiveRows):>9}")

