"""A comparison as text cells: what the compare page and the compare export both show, so the
two cannot drift apart."""

from __future__ import annotations

from dataclasses import dataclass

from app.services.comparison import (
    FAMILIES,
    METRICS,
    CaseComparison,
    Comparison,
    change_text,
    verdict_text,
)

CASE_COLUMNS = ("case", "verdict (layer time)", "why: phases, GPU state", *FAMILIES)
GEOMEAN_COLUMNS = ("mode", "precision", "pipeline", "cases", "layer time, geometric mean")
PROVENANCE_COLUMNS = ("meta field", "base", "head")


@dataclass(frozen=True)
class CaseCells:
    case_id: str
    status: str  # the verdict's word, the cell's class
    verdict: str
    why: str
    families: list[list[str]]  # per family in FAMILIES, one line per metric measured


def family_lines(row: CaseComparison, family: str) -> list[str]:
    lines = [f"{m.name} {change_text(row.changes[m.key], m.unit)}"
             for m in METRICS if m.family == family
             and (row.changes[m.key].base is not None or row.changes[m.key].head is not None)]
    if family == "GPU state" and any(c.gpuState for c in (row.base, row.head)):
        base, head = row.throttle
        lines.append(f"throttle: {base} → {head}")
    return lines or ["n/a"]


def case_cells(row: CaseComparison) -> CaseCells:
    return CaseCells(
        case_id=row.case_id, status=row.verdict.status, verdict=verdict_text(row),
        why=row.attribution.text() or "no phases or GPU state on both sides",
        families=[family_lines(row, f) for f in FAMILIES],
    )


def geomean_rows(result: Comparison) -> list[list[str]]:
    return [[g.mode, g.precision, g.pipeline, str(g.cases), f"{g.change_percent:+.1f} %"]
            for g in result.geomeans]


def provenance_rows(result: Comparison) -> list[list[str]]:
    return [[p.field, p.base, p.head] for p in result.provenance]


def group_lines(result: Comparison) -> list[str]:
    return [g.text() for g in result.groups]


def series_line(result: Comparison) -> str:
    if result.same_series:
        return (f"Report {result.head_id} continues the series of report {result.base_id} "
                "(same GPU and shape): verdicts are the history page's.")
    return (f"Reports {result.base_id} and {result.head_id} are not an earlier and a later "
            "report of one series: each case is judged against the base alone.")
