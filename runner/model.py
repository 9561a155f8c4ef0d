"""The analytical model of docs/metrics.md ("The analytical model"), pure Python, no torch.

Every figure here is exact arithmetic on integers and fractions until the last step, so
``moescope model --check`` can hold the reference report to a relative error of 1e-9.

Resolutions of what docs/metrics.md leaves open, each worked out from the reference report
(ingest/data/gb300-nvl72-isolated-v6.json, 63 cases):

- *Quantized* means the precision is not bf16 (mxfp8, nvfp4, fp8): block-scaled GEMMs take
  expert groups padded to 128 rows, so capacityRows and the byte model key on precision.
- *active_ranks*: the routed-weight term averages, over ranks, the experts that received
  at least one row. Rows are split evenly across a rank's El experts, so a rank with
  ``rows`` rows touches ``min(El, rows)`` experts; with rows >= El everywhere (all the
  reference cases) this is exactly ``El * active_ranks / EP`` of docs/metrics.md, where a rank
  is active when it receives any row (at i = EP only rank 0 is: El / EP experts).
- *training savedBytes* of a quantized precision: the reference's mxfp8 training cases fit
  ``TK*2D + padded_r*(D*b + 4F + F*b)`` (b = 33/32) exactly, at three widths and under
  imbalance, where padded_r is rank r's rows split evenly over its El experts (spares to
  the first) and each expert's group rounded up to 128 rows: the dispatched rows and the
  SwiGLU output are kept quantized, the gate and up outputs in bf16, all in the padded
  groups. bf16 keeps ``TK*2D + rows_r*(2D + 4F)`` (no padding) as docs/metrics.md says. nvfp4
  training is not in the reference; the same form with b = 9/16 is an extrapolation, and
  fp8's with its activations' b = 33/32 (1x128 fp32 scales; ``ACTIVATION_BYTES``).
- *rows rank 0 sends to other ranks*: the reference's payloads come from its sampled
  routing (e.g. 10757 rows at EP8, i = 1, where the plan expects 10752), so no closed form
  reproduces them. The model gives the plan's expectation: rank 0 splits its TK rows over
  destinations in proportion to receiveRows and keeps ``TK * receiveRows[0] / (EP*TK)``;
  the runner reports the count its own routing actually sent. ``--check`` shows the
  payload's error for information only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ingest.precisions import ACTIVATION_BYTES, BLOCK_ELEMENTS, ELEMENT_BYTES
from runner.spec import PRECISIONS, CaseSpec, Shape, check_spec

assert tuple(ELEMENT_BYTES) == PRECISIONS, "runner.spec.PRECISIONS must list ELEMENT_BYTES"
assert set(BLOCK_ELEMENTS) == set(PRECISIONS) - {"bf16"}, "a quantized precision's block"
GROUP_ROWS = 128  # quantized GEMMs take each expert's rows padded to a multiple of this
CAPACITY_FACTOR = 8
TRAINING_FACTOR = 3  # forward + backward (two GEMMs per forward GEMM)


class ModelError(ValueError):
    """A case the model cannot describe; the message names the field."""


# --- routing plan ---------------------------------------------------------------------

def zipf_exponent(ep: int, imbalance: float) -> float:
    """s with sum_{r<ep} (r+1)^-s = ep / imbalance, for 1 <= imbalance < ep.

    The sum falls strictly from ep (s = 0) towards 1 (s -> inf), so bisection on a
    bracket that doubles until it holds the target converges to the float's precision.
    """
    if imbalance == 1:
        return 0.0
    target = ep / imbalance

    def total(s: float) -> float:
        return math.fsum((r + 1) ** -s for r in range(ep))

    lo, hi = 0.0, 1.0
    while total(hi) > target:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if total(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def largest_remainder(total: int, weights: list[float]) -> list[int]:
    """``total`` split in proportion to ``weights``: floors, then one more to the largest
    remainders (ties to the lower index) until the sum is ``total``."""
    norm = math.fsum(weights)
    quotas = [total * w / norm for w in weights]
    floors = [math.floor(q) for q in quotas]
    short = total - sum(floors)
    order = sorted(range(len(weights)), key=lambda r: (-(quotas[r] - floors[r]), r))
    for r in order[:short]:
        floors[r] += 1
    return floors


def receive_rows(ep: int, tk: int, imbalance: float) -> list[int]:
    """Rows each rank receives: the EP*TK routed rows split over ranks by the Zipf plan."""
    if imbalance == ep:
        return [ep * tk] + [0] * (ep - 1)
    if imbalance == 1:
        return [tk] * ep
    s = zipf_exponent(ep, imbalance)
    return largest_remainder(ep * tk, [(r + 1) ** -s for r in range(ep)])


def send_matrix(ep: int, tk: int, receive: list[int]) -> list[list[int]]:
    """sends[src][dst] under the plan: column sums equal ``receive``, row sums equal TK.

    Each source owes every destination receive[dst] // ep rows; the spare rows of all the
    columns, taken in turn, go to the sources round-robin. A column's spare is under ep, so
    no source takes two from one column, and the spares add up to ep * (TK - sum of the
    bases), so every source ends with exactly TK rows.
    """
    if sum(receive) != ep * tk:
        raise ModelError(f"receiveRows: sum {sum(receive)} is not ep*TK = {ep * tk}")
    sends = [[rows // ep for rows in receive] for _ in range(ep)]
    position = 0
    for dst, rows in enumerate(receive):
        for _ in range(rows % ep):
            sends[position % ep][dst] += 1
            position += 1
    return sends


# --- figures ----------------------------------------------------------------------------

def experts_per_rank(shape: Shape, case: CaseSpec) -> int:
    return shape.E // case.ep


def capacity_rows(shape: Shape, case: CaseSpec, factor: int = CAPACITY_FACTOR) -> int:
    rows = factor * shape.TK
    if not case.quantized:
        return rows
    # Every expert but one may waste up to 127 padding rows on top of the bf16 capacity.
    return GROUP_ROWS * (-(-rows // GROUP_ROWS) + experts_per_rank(shape, case) - 1)


def forward_flops(shape: Shape, case: CaseSpec) -> int:
    """Gate, up and down GEMMs of a SwiGLU expert (2 FLOPs a MAC); the router is free."""
    return 6 * shape.TK * shape.D * case.F


def useful_flops(shape: Shape, case: CaseSpec) -> int:
    return forward_flops(shape, case) * (TRAINING_FACTOR if case.training else 1)


def active_experts_mean(shape: Shape, case: CaseSpec, receive: list[int]) -> Fraction:
    el = experts_per_rank(shape, case)
    return Fraction(sum(min(el, rows) for rows in receive), case.ep)


def forward_byte_buckets(shape: Shape, case: CaseSpec, receive: list[int]) -> dict[str, Fraction]:
    """Useful HBM bytes of one forward pass, by what they are (cf. meta.metricsExample)."""
    d, f, tk = shape.D, case.F, shape.TK
    return {
        "inputs": Fraction(shape.T * d * 2),
        "routed_activations": Fraction(tk * (2 * d + 4 * f)),
        "routed_weights": active_experts_mean(shape, case, receive) * 3 * d * f
        * ELEMENT_BYTES[case.precision],
        "routing_scores": Fraction(tk * 4),
    }


def model_bytes(shape: Shape, case: CaseSpec, receive: list[int]) -> Fraction:
    forward = sum(forward_byte_buckets(shape, case, receive).values(), Fraction(0))
    return forward * (TRAINING_FACTOR if case.training else 1)


def input_bytes(shape: Shape) -> int:
    return shape.T * shape.D * 2


def saved_bytes(shape: Shape, case: CaseSpec, receive: list[int]) -> list[int]:
    """Activations kept for the backward pass, per rank (training only)."""
    if not case.training:
        return []
    d, f = shape.D, case.F
    if case.quantized:
        b = ACTIVATION_BYTES[case.precision]
        per_row = d * b + 4 * f + f * b
    else:
        per_row = Fraction(2 * d + 4 * f)
    el = experts_per_rank(shape, case)
    out = []
    for rows in receive:
        kept_rows = padded_rows(rows, el) if case.quantized else rows
        value = shape.TK * 2 * d + kept_rows * per_row
        if value.denominator != 1:
            raise ModelError(f"F: {f} rows of {case.precision} do not fill whole scale blocks")
        out.append(int(value))
    return out


def rows_per_expert(rows: int, experts: int) -> list[int]:
    """A rank's rows split evenly over its experts, the spare ones to the first experts."""
    base, spare = divmod(rows, experts)
    return [base + (1 if e < spare else 0) for e in range(experts)]


def padded_rows(rows: int, experts: int) -> int:
    """Rows a quantized pipeline holds: each expert's group padded to GROUP_ROWS."""
    return sum(-(-n // GROUP_ROWS) * GROUP_ROWS for n in rows_per_expert(rows, experts))


def payload_rows_rank0(shape: Shape, case: CaseSpec, receive: list[int]) -> Fraction:
    """Rows rank 0 is expected to send to other ranks (see the module docstring)."""
    kept = Fraction(shape.TK * receive[0], case.ep * shape.TK)
    return shape.TK - kept


def logical_payload_rank0(rows_sent: int | Fraction, shape: Shape) -> Fraction:
    """Dispatch and combine, bf16, of the rows rank 0 sends elsewhere."""
    return 2 * shape.D * 2 * Fraction(rows_sent)


def bf16_scratch_row_bytes(shape: Shape, case: CaseSpec) -> int:
    """docs/metrics.md's bf16 scratch per capacity row."""
    d, f = shape.D, case.F
    return 4 * d + 10 * f if case.training else 2 * d + 6 * f


def scratch_bytes_bf16(shape: Shape, case: CaseSpec, factor: int = CAPACITY_FACTOR
                       ) -> int | None:
    """docs/metrics.md's bf16 scratch; the quantized pipelines' scratch is not modelled."""
    if case.quantized:
        return None
    return capacity_rows(shape, case, factor) * bf16_scratch_row_bytes(shape, case)


def runner_scratch_bytes(shape: Shape, case: CaseSpec, factor: int) -> int:
    """The runner's scratch accounting: the bf16 widths over the capacity rows, plus the
    uint8 wire rows (data and scales, 4 bytes of tensor scale) of a quantized dispatch."""
    per_row = bf16_scratch_row_bytes(shape, case)
    if case.quantized and case.pipeline != "standard":
        per_row += int(shape.D * ACTIVATION_BYTES[case.precision]) + 4
    return capacity_rows(shape, case, factor) * per_row


@dataclass(frozen=True)
class CaseModel:
    id: str
    usefulFlops: int
    modelBytes: Fraction
    capacityRows: int
    receiveRows: list[int]
    inputBytes: int
    savedBytes: list[int]
    logicalForwardPayloadBytesRank0: Fraction
    scratchBytes: int | None
    forwardFlops: int

    def useful_tf_per_gpu(self, layer_ms: float) -> float:
        return self.usefulFlops / (layer_ms * 1e-3) / 1e12

    def hbm_gbps(self, layer_ms: float) -> float:
        return float(self.modelBytes) / (layer_ms * 1e-3) / 1e9

    def as_json(self, training: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "usefulFlops": self.usefulFlops,
            "modelBytes": _number(self.modelBytes),
            "capacityRows": self.capacityRows,
            "receiveRows": self.receiveRows,
            "inputBytes": self.inputBytes,
            "logicalForwardPayloadBytesRank0": _number(self.logicalForwardPayloadBytesRank0),
            "scratchBytes": self.scratchBytes,
        }
        if training:
            out["savedBytes"] = self.savedBytes
        return out


def _number(value: Fraction) -> int | float:
    return int(value) if value.denominator == 1 else float(value)


def model_case(shape: Shape, case: CaseSpec, capacity_factor: int = CAPACITY_FACTOR
               ) -> CaseModel:
    check_spec(shape, case)
    receive = receive_rows(case.ep, shape.TK, case.imbalance)
    return CaseModel(
        id=case.id,
        usefulFlops=useful_flops(shape, case),
        modelBytes=model_bytes(shape, case, receive),
        capacityRows=capacity_rows(shape, case, capacity_factor),
        receiveRows=receive,
        inputBytes=input_bytes(shape),
        savedBytes=saved_bytes(shape, case, receive),
        logicalForwardPayloadBytesRank0=logical_payload_rank0(
            payload_rows_rank0(shape, case, receive), shape),
        scratchBytes=scratch_bytes_bf16(shape, case, capacity_factor),
        forwardFlops=forward_flops(shape, case),
    )
