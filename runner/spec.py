"""What one case is: the layer's shape, the case's coordinates, and the check that a case
fits its shape. Every runner module that names a case imports these; the analytical
model (model.py), the matrix reader and the execution modules build on them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Mode = Literal["inference", "training"]
MODES: tuple[Mode, ...] = ("inference", "training")
PRECISIONS = ("bf16", "mxfp8", "nvfp4", "fp8")
# The pipelines the runner's registry implements (runner/pipelines.py checks it agrees).
PIPELINES = ("standard", "staged", "mega")


class SpecError(ValueError):
    """A case that does not fit its shape or names an unknown value; the message starts
    with the field."""


@dataclass(frozen=True)
class Shape:
    T: int
    D: int
    E: int
    K: int

    @property
    def TK(self) -> int:
        return self.T * self.K


@dataclass(frozen=True)
class CaseSpec:
    mode: Mode
    ep: int
    precision: str
    pipeline: str
    category: str
    F: int
    imbalance: float

    @property
    def id(self) -> str:
        return (f"{self.mode}-ep{self.ep}-{self.precision}-{self.pipeline}-{self.category}"
                f"-F{self.F}-i{format_imbalance(self.imbalance)}")

    @property
    def quantized(self) -> bool:
        return self.precision != "bf16"

    @property
    def training(self) -> bool:
        return self.mode == "training"


def format_imbalance(value: float) -> str:
    """1.0 -> '1', 1.5 -> '1.5' (the reference writes ``i1``, ``i4``)."""
    return f"{value:g}" if value != int(value) else str(int(value))


def check_spec(shape: Shape, case: CaseSpec) -> None:
    if case.mode not in MODES:
        raise SpecError(f"mode: {case.mode!r} is not one of {', '.join(MODES)}")
    if case.precision not in PRECISIONS:
        raise SpecError(f"precision: {case.precision!r} is not one of {', '.join(PRECISIONS)}")
    if case.pipeline not in PIPELINES:
        raise SpecError(f"pipeline: {case.pipeline!r} is not one of {', '.join(PIPELINES)}")
    if case.ep < 1:
        raise SpecError(f"ep: must be >= 1, got {case.ep}")
    if shape.E % case.ep:
        raise SpecError(f"ep: E={shape.E} experts do not split evenly over ep={case.ep} ranks")
    if shape.K > shape.E:
        raise SpecError(f"K: top-{shape.K} needs at least {shape.K} experts, E={shape.E}")
    if case.F < 1:
        raise SpecError(f"F: must be >= 1, got {case.F}")
    if not 1 <= case.imbalance <= case.ep:
        raise SpecError(
            f"imbalance: must lie in [1, ep={case.ep}] (rank 0 receives imbalance x the mean),"
            f" got {case.imbalance}")
