"""What a case's configuration is and how it is named and ordered: (mode, EP, category, F,
imbalance) with its precision x pipeline variants. The per-case charts' axis and the
configuration matrix both place cases by it, so a point and a cell carry the same label."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass
from typing import Any

from app.case_view import CaseView

# Known values first, in the order an engineer reads them; others follow alphabetically.
_ORDER = {
    "mode": ("inference", "training"),
    "precision": ("bf16", "fp8", "mxfp8", "nvfp4"),
    "pipeline": ("standard", "staged", "mega"),
}


def rank(field: str, value: Any) -> tuple[int, str]:
    known = _ORDER.get(field, ())
    return (known.index(value), "") if value in known else (len(known), str(value))


@dataclass(frozen=True)
class Configuration:
    mode: str
    ep: int
    category: str
    F: int
    imbalance: float

    def sort_key(self) -> tuple[Any, ...]:
        return (rank("mode", self.mode), self.ep, self.F, self.imbalance, self.category)

    def label(self, with_category: bool = False) -> str:
        """``EP8 F3072 i1``: short enough for an axis; the category where it tells apart."""
        text = f"EP{self.ep} F{self.F} i{self.imbalance:g}"
        return f"{text} {self.category}" if with_category else text


ConfigurationFields = tuple[str, int, str, int, float]  # Configuration's, in order


def configuration_fields(case: CaseView) -> ConfigurationFields:
    return (case.mode, int(case.ep), case.category, int(case.F),
            float(case.imbalance))


def configuration(case: CaseView) -> Configuration:
    return Configuration(*configuration_fields(case))


def variant(case: CaseView) -> tuple[str, str]:
    return case.precision, case.pipeline


def variant_key(pair: tuple[str, str]) -> tuple[Any, ...]:
    return (rank("precision", pair[0]), rank("pipeline", pair[1]))


# The share of a configuration's slot its variants fill; the rest separates configurations.
_FILL = 0.84


@dataclass(frozen=True)
class Group:
    """Consecutive configurations of one mode and category, shown under one heading."""

    title: str
    first: int  # index of its first configuration
    last: int


@dataclass(frozen=True)
class Placement:
    """Where each case sits on a per-case chart's axis: configuration i at i, its variants
    side by side within it, in the same order in every configuration (blank where not run)."""

    x: dict[str, float]  # case id -> position
    width: float  # of one variant's slot: a bar's width
    configurations: list[Configuration]
    labels: list[str]  # each configuration's tick label
    groups: list[Group]


def placement(cases: Sequence[CaseView]) -> Placement:
    # Each case read once, its configuration as a plain tuple, a Configuration made per
    # distinct one: every per-case chart places its cases, 15 times a filter change, and at
    # 5,000 cases a dataclass per case was half the cost.
    keys = [(c.id, configuration_fields(c), variant(c)) for c in cases]
    variants = sorted({v for _, _, v in keys}, key=variant_key)
    column = {v: i for i, v in enumerate(variants)}
    configs = sorted((Configuration(*k) for k in {k for _, k, _ in keys}),
                     key=lambda c: (rank("mode", c.mode), c.category, c.ep, c.F, c.imbalance))
    index = {astuple(c): i for i, c in enumerate(configs)}
    width = _FILL / max(len(variants), 1)
    x = {case_id: index[config] + (column[v] - (len(variants) - 1) / 2) * width
         for case_id, config, v in keys}
    groups: list[Group] = []
    for i, config in enumerate(configs):
        title = f"{config.mode} · {config.category}"
        if groups and groups[-1].title == title:
            groups[-1] = Group(title, groups[-1].first, i)
        else:
            groups.append(Group(title, i, i))
    # Stacked lines stay narrow at 1024 px; the group heading names mode and category.
    labels = [f"EP{c.ep}<br>F{c.F}<br>i{c.imbalance:g}" for c in configs]
    return Placement(x, width, configs, labels, groups)
