"""The experts' weights kept from one case to the next of the same shape.

A matrix's cases of one shape (D, F, the rank's experts, the seed) differ in routing,
pipeline or mode, not in their weights: drawing them again (``make_experts``) and
quantizing them again is set-up time spent for nothing. The last shape's weights are
kept, with their quantized form for the last precision; a case gets them back as they
were drawn: no gradient (training accumulates into ``.grad``) and not requiring one,
so a case's numbers do not depend on the case before it. Only one shape's weights are
kept, and ``keep`` drops everything else before a case resets its memory peaks, so a
case's peaks hold its own weights only, as when it drew them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from runner.experts import Experts, make_experts, quantize_experts


@dataclass(frozen=True)
class WeightKey:
    d: int
    f: int
    first_expert: int
    count: int
    seed: int
    dtype: torch.dtype
    device: torch.device


@dataclass
class WeightCache:
    key: WeightKey | None = None
    drawn: Experts | None = None
    quantized: dict[tuple[str, bool], Experts] = field(default_factory=dict)
    draws: int = 0  # make_experts calls (a test counts them)

    def keep(self, key: WeightKey, precision: str, native: bool) -> None:
        """Drop what the next case (``key``, ``precision``) will not use."""
        if key != self.key:
            self.key, self.drawn = None, None
            self.quantized.clear()
        for other in [q for q in self.quantized if q != (precision, native)]:
            del self.quantized[other]

    def experts(self, key: WeightKey, precision: str, native: bool) -> Experts:
        """The weights of ``key`` quantized for ``precision`` (``native``: also as
        ``torch._scaled_mm`` operands), drawn only if the last case's were another
        shape's."""
        self.keep(key, precision, native)
        if self.drawn is None:
            self.drawn = make_experts(key.d, key.f, key.first_expert, key.count, key.seed,
                                      key.dtype, key.device)
            self.key = key
            self.draws += 1
        for p in self.drawn.parameters():
            p.grad = None
            p.requires_grad_(False)
        if (precision, native) not in self.quantized:
            self.quantized[(precision, native)] = quantize_experts(self.drawn, precision,
                                                                   native)
        return self.quantized[(precision, native)]


WEIGHTS = WeightCache()
