"""Synthetic series built from the reference report: the same 63 cases measured again and
again, each time moved by seeded noise that stays within the case's own window spread."""

from __future__ import annotations

import copy
import random
import statistics
from datetime import date, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.services import reports as report_service
from ingest.validate import validate_report

Body = dict[str, Any]

FIRST_DATE = date(2026, 9, 1)


def with_window_spread(case: Body, percent: float) -> None:
    """Stretch the case's combined windows about their median to a spread of ``percent``."""
    windows = case["windows"]["combined"]
    median = statistics.median(windows)
    stretch = percent / 100 * median / (max(windows) - min(windows))
    case["windows"]["combined"] = [median + (w - median) * stretch for w in windows]


def _scaled(case: Body, factor: float) -> None:
    """The case measured ``factor`` times slower: every time, and the throughput."""
    for key in ("forwardMS", "backwardMS", "layerMS"):
        if case.get(key) is not None:
            case[key] *= factor
    case["windows"] = {kind: [w * factor for w in ws] for kind, ws in case["windows"].items()}
    case["usefulTFPerGPU"] /= factor


def spread_percent(case: Body) -> float:
    windows = case["windows"]["combined"]
    return (max(windows) - min(windows)) / statistics.median(windows) * 100


def synthetic_series(
    reference: Body,
    reports: int,
    *,
    seed: int = 0,
    newest_factor: dict[str, float] | None = None,
    window_spread: dict[str, float] | None = None,
) -> list[Body]:
    """``reports`` reports, oldest first, one day apart. Each case's times are the
    reference's times times 1 + u·s/2, u uniform in [-1, 1] (seeded), s its window spread:
    no more than the case's own windows already vary. ``window_spread`` sets a case's
    spread first; ``newest_factor`` then slows (> 1) or speeds up a case in the last one."""
    rng = random.Random(seed)
    base = copy.deepcopy(reference)
    for case in base["cases"]:
        if window_spread and case["id"] in window_spread:
            with_window_spread(case, window_spread[case["id"]])
    series = []
    for i in range(reports):
        report = copy.deepcopy(base)
        report["meta"]["date"] = (FIRST_DATE + timedelta(days=i)).isoformat()
        report["meta"]["runId"] = f"synthetic-{seed}-{i}"
        for case in report["cases"]:
            factor = 1 + rng.uniform(-1, 1) * spread_percent(case) / 100 / 2
            if i == reports - 1 and newest_factor:
                factor *= newest_factor.get(case["id"], 1.0)
            _scaled(case, factor)
        series.append(report)
    return series


def ingest(session: Session, body: Body) -> int:
    """Store a report, committed; its id."""
    report_id = report_service.ingest_report(session, body, validate_report(body)).id
    session.commit()
    return report_id
