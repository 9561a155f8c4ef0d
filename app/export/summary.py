"""The export's summary table: per mode x precision x pipeline, how many cases and how
close to the peak they came."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from app.case_fields import CaseDict


@dataclass(frozen=True)
class SummaryRow:
    mode: str
    precision: str
    pipeline: str
    cases: int
    best_percent_of_peak: float | None
    median_percent_of_peak: float | None  # over the cases that have a % of peak
    best_useful_tf: float | None


def summary_rows(cases: Sequence[CaseDict]) -> list[SummaryRow]:
    groups: dict[tuple[str, str, str], list[CaseDict]] = defaultdict(list)
    for case in cases:
        groups[(str(case["mode"]), str(case["precision"]), str(case["pipeline"]))].append(case)
    rows = []
    for (mode, precision, pipeline), group in sorted(groups.items()):
        percents = [c["percentOfPeak"] for c in group if c.get("percentOfPeak") is not None]
        useful = [c["usefulTFPerGPU"] for c in group if c.get("usefulTFPerGPU") is not None]
        rows.append(SummaryRow(
            mode=mode, precision=precision, pipeline=pipeline, cases=len(group),
            best_percent_of_peak=max(percents, default=None),
            median_percent_of_peak=statistics.median(percents) if percents else None,
            best_useful_tf=max(useful, default=None),
        ))
    return rows
