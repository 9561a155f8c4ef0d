"""The summary per mode x precision x pipeline: how many cases, how close to the peak they
came, their median layer time and what bounds them. The report page and the export both
show these rows."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from app.case_fields import CaseDict
from app.figures.configuration import rank
from ingest.derived import LIMITERS


@dataclass(frozen=True)
class SummaryRow:
    mode: str
    precision: str
    pipeline: str
    cases: int
    best_percent_of_peak: float | None
    median_percent_of_peak: float | None  # over the cases that have a % of peak
    best_useful_tf: float | None
    median_layer_ms: float | None
    limiters: dict[str, int]  # limiter -> cases, every limiter named (0 included)

    @property
    def limiter_text(self) -> str:
        """``compute 3, nvlink 1``: the limiters that occur, in LIMITERS order."""
        return ", ".join(f"{name} {n}" for name, n in self.limiters.items() if n) or "n/a"


def summary_rows(cases: Sequence[CaseDict]) -> list[SummaryRow]:
    groups: dict[tuple[str, str, str], list[CaseDict]] = defaultdict(list)
    for case in cases:
        groups[(str(case["mode"]), str(case["precision"]), str(case["pipeline"]))].append(case)
    rows = []
    for (mode, precision, pipeline), group in sorted(groups.items(), key=_order):
        percents = [c["percentOfPeak"] for c in group if c.get("percentOfPeak") is not None]
        useful = [c["usefulTFPerGPU"] for c in group if c.get("usefulTFPerGPU") is not None]
        times = [c["layerMS"] for c in group if c.get("layerMS") is not None]
        found = Counter(c.get("limiter") for c in group)
        rows.append(SummaryRow(
            mode=mode, precision=precision, pipeline=pipeline, cases=len(group),
            best_percent_of_peak=max(percents, default=None),
            median_percent_of_peak=statistics.median(percents) if percents else None,
            best_useful_tf=max(useful, default=None),
            median_layer_ms=statistics.median(times) if times else None,
            limiters={name: found[name] for name in LIMITERS},
        ))
    return rows


def _order(item: tuple[tuple[str, str, str], list[CaseDict]]) -> tuple[object, ...]:
    mode, precision, pipeline = item[0]
    return rank("mode", mode), rank("precision", precision), rank("pipeline", pipeline)
