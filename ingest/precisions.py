"""Bytes per weight element of each precision, data plus its share of the block scale
(docs/metrics.md, "The analytical model"): the one table the runner's model and the derived
busiest-rank HBM figure read."""

from __future__ import annotations

from fractions import Fraction

ELEMENT_BYTES: dict[str, Fraction] = {
    "bf16": Fraction(2),
    "mxfp8": Fraction(33, 32),  # e4m3 byte + one e8m0 scale byte per 32 elements
    "nvfp4": Fraction(9, 16),  # half a byte (e2m1) + one e4m3 scale byte per 16 elements
}
