"""The summary per mode x precision x pipeline: how many cases, how close to the peak they
came, their median layer time and what bounds them. The report page and the export both
show these rows."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from app.case_view import CaseView
from app.figures.configuration import rank
from ingest.limiters import LIMITERS
from ingest.ties import Scored, best_of


@dataclass(frozen=True)
class SummaryRow:
    mode: str
    precision: str
    pipeline: str
    cases: int
    best_percent_of_peak: float | None  # never a data error (ingest.ties.NEVER_BEST)
    median_percent_of_peak: float | None  # over the cases that have a % of peak
    best_useful_tf: float | None
    median_layer_ms: float | None
    limiters: dict[str, int]  # limiter -> cases, every limiter named (0 included)
    best_tied: bool = False  # another case is within noise of the best % of peak
    best_tf_tied: bool = False  # ... of the best useful TFLOP/s

    @property
    def limiter_text(self) -> str:
        """``compute 3, nvlink 1``: the limiters that occur, in LIMITERS order."""
        return ", ".join(f"{name} {n}" for name, n in self.limiters.items() if n) or "n/a"


def summary_rows(cases: Sequence[CaseView]) -> list[SummaryRow]:
    groups: dict[tuple[str, str, str], list[CaseView]] = defaultdict(list)
    for case in cases:
        groups[(case.mode, case.precision, case.pipeline)].append(case)
    rows = []
    for (mode, precision, pipeline), group in sorted(groups.items(), key=_order):
        percents = [c.percentOfPeak for c in group if c.percentOfPeak is not None]
        times = [c.layerMS for c in group if c.layerMS is not None]
        found = Counter(c.limiter for c in group)
        best_percent = _best(group, [c.percentOfPeak for c in group])
        best_tf = _best(group, [c.usefulTFPerGPU for c in group])
        rows.append(SummaryRow(
            mode=mode, precision=precision, pipeline=pipeline, cases=len(group),
            best_percent_of_peak=best_percent[0],
            median_percent_of_peak=statistics.median(percents) if percents else None,
            best_useful_tf=best_tf[0],
            median_layer_ms=statistics.median(times) if times else None,
            limiters={name: found[name] for name in LIMITERS},
            best_tied=best_percent[1], best_tf_tied=best_tf[1],
        ))
    return rows


def _best(group: Sequence[CaseView], values: Sequence[float | None]
          ) -> tuple[float | None, bool]:
    """The group's best of ``values`` (one per case; ingest.ties: no data error) and
    whether another case ties with it within noise."""
    scored = [(v, c) for v, c in zip(values, group, strict=True) if v is not None]
    best = best_of([Scored(float(v), c.windowSpreadPercent, c.caveat_codes) for v, c in scored],
                   "higher")
    return (None, False) if best is None else (float(scored[best.index][0]), best.tied)


def best_text(value: float | None, tied: bool, digits: int = 1) -> str:
    """A summary's best, saying "tied within noise" where another case is as good."""
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}" + (" (tied within noise)" if tied else "")


def _order(item: tuple[tuple[str, str, str], list[CaseView]]) -> tuple[object, ...]:
    mode, precision, pipeline = item[0]
    return rank("mode", mode), rank("precision", precision), rank("pipeline", pipeline)
