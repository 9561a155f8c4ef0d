"""Series with known changes for the alert tests: the runner's fields on every report
(compare_helpers.series), a step, an outlier, a driver upgrade."""

from __future__ import annotations

import statistics
from collections.abc import Collection
from typing import Any

from compare_helpers import series, slow_down
from history_helpers import with_window_spread

Body = dict[str, Any]
OLD_DRIVER, NEW_DRIVER = "580.95.05", "580.159.03"


def case_of(report: Body, case_id: str) -> Body:
    return next(c for c in report["cases"] if c["id"] == case_id)


def combine_step(bodies: list[Body], case_ids: Collection[str], at: int,
                 percent: float) -> None:
    """From report ``at`` on, the cases ``percent`` slower, all of it in the combine phase;
    the driver upgraded at the same report."""
    for i, body in enumerate(bodies):
        body["meta"]["host"]["driver"] = OLD_DRIVER if i < at else NEW_DRIVER
        if i < at:
            continue
        for case_id in case_ids:
            case = case_of(body, case_id)
            extra = percent / 100 * case["layerMS"]
            slow_down(case, extra)
            case["phaseMS"]["combine"] += extra


def quiet_series(reference: Body, reports: int, case_id: str, spread: float = 1.0
                 ) -> list[Body]:
    """``reports`` reports whose case ``case_id`` varies by ``spread`` % at most (the
    reference is changed)."""
    with_window_spread(case_of(reference, case_id), spread)
    return series(reference, reports)


def scale_from(bodies: list[Body], case_id: str, at: int, factor: float,
               until: int | None = None) -> None:
    """The case ``factor`` times slower in reports ``at`` to ``until`` (exclusive)."""
    for body in bodies[at:until]:
        case = case_of(body, case_id)
        slow_down(case, (factor - 1) * case["layerMS"])


def layer_ms(bodies: list[Body], case_id: str) -> list[float]:
    return [case_of(b, case_id)["layerMS"] for b in bodies]


def mean_change_percent(values: list[float], at: int) -> float:
    """The after-mean against the before-mean of a step at ``at``, percent."""
    return (statistics.fmean(values[at:]) / statistics.fmean(values[:at]) - 1) * 100
