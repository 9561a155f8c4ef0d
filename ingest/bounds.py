"""What bounds a case, in words (DESIGN.md "Derived metrics": limiter): the roof the busiest
rank comes nearest, how near, how much hotter that rank is than the mean, and how long the
others wait for it. The case page, the case table and the export say the same sentence."""

from __future__ import annotations

from dataclasses import dataclass

from ingest.derived import (
    BOUND_UTIL_PERCENT,
    LATENCY_UTIL_PERCENT,
    imbalance_loss_percent,
    nearest_roof,
)

ROOF_NAMES = {"compute": "compute", "hbm": "HBM", "nvlink": "NVLink"}
# Below this factor the ranks count as balanced: nothing to say about waiting.
BALANCED = 1.05


@dataclass(frozen=True)
class Bound:
    limiter: str | None
    compute: float | None  # the busiest rank's utilisations, percent
    hbm: float | None
    nvlink: float | None
    hot_rank_factor: float | None

    def nearest(self) -> tuple[str, float] | None:
        return nearest_roof(self.compute, self.hbm, self.nvlink)


def _wait(hot: float | None) -> str:
    if hot is None or hot < BALANCED:
        return "; the ranks are balanced" if hot is not None else ""
    loss = imbalance_loss_percent(hot) or 0.0
    return f"; the other ranks wait {loss:.0f} % of the time"


def _rows(hot: float | None) -> str:
    return "" if hot is None or hot < BALANCED else f", {hot:.1f}× the mean rows"


def bound_sentence(b: Bound) -> str:
    """``compute-bound on the busiest rank (62 %, 4.0× the mean rows); the other ranks wait
    75 % of the time``; "nearest roof" below BOUND_UTIL_PERCENT, "latency-bound" below
    LATENCY_UTIL_PERCENT."""
    nearest = b.nearest()
    if b.limiter is None or nearest is None:
        return "no roof known: the report gives no peak for this case's figures"
    roof, util = nearest
    name = ROOF_NAMES[roof]
    where = _where(b.hot_rank_factor)
    if b.limiter == "latency":
        return (f"latency-bound: no roof reaches {LATENCY_UTIL_PERCENT:g} %{where} "
                f"(nearest roof {name}, {util:.0f} %{_rows(b.hot_rank_factor)})"
                f"{_wait(b.hot_rank_factor)}")
    if util < BOUND_UTIL_PERCENT:
        return (f"nearest roof {name}{where} ({util:.0f} %{_rows(b.hot_rank_factor)}), "
                f"none reached{_wait(b.hot_rank_factor)}")
    return (f"{name}-bound{where} ({util:.0f} %{_rows(b.hot_rank_factor)})"
            f"{_wait(b.hot_rank_factor)}")


def _where(hot: float | None) -> str:
    # Balanced ranks are all the busiest: naming one would mislead.
    return "" if hot is not None and hot < BALANCED else " on the busiest rank"


def bound_short(b: Bound) -> str:
    """The sentence in a table cell's few words, for paper where a title does not show:
    ``compute 62 %, 4.0× rows``; ``near NVLink 42 %`` below BOUND_UTIL_PERCENT; ``latency
    (HBM 19 %)``; '' when no roof is known."""
    nearest = b.nearest()
    if b.limiter is None or nearest is None:
        return ""
    roof, util = nearest
    name = ROOF_NAMES[roof]
    rows = "" if b.hot_rank_factor is None or b.hot_rank_factor < BALANCED \
        else f", {b.hot_rank_factor:.1f}× rows"
    if b.limiter == "latency":
        return f"latency ({name} {util:.0f} %){rows}"
    if util < BOUND_UTIL_PERCENT:
        return f"near {name} {util:.0f} %{rows}"
    return f"{name} {util:.0f} %{rows}"
