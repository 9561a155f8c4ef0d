"""Bytes per element of each precision, data plus its share of the block scales
(docs/metrics.md, "The analytical model"): the one table the runner's model, its wire
rows and the derived busiest-rank HBM figure read.

``ELEMENT_BYTES`` is a weight's; ``ACTIVATION_BYTES`` a dispatched row's (and a kept
activation's). They differ only for fp8, whose weights carry one fp32 scale per 128x128
tile and whose rows one per 128 elements (DeepSeek-V3's recipe): a row of D elements is
D + 4 D / 128 bytes on the wire.
"""

from __future__ import annotations

from fractions import Fraction

ELEMENT_BYTES: dict[str, Fraction] = {
    "bf16": Fraction(2),
    "mxfp8": Fraction(33, 32),  # e4m3 byte + one e8m0 scale byte per 32 elements
    "nvfp4": Fraction(9, 16),  # half a byte (e2m1) + one e4m3 scale byte per 16 elements
    "fp8": 1 + Fraction(4, 128 * 128),  # e4m3 byte + one fp32 scale per 128x128 tile
}
ACTIVATION_BYTES: dict[str, Fraction] = {
    **ELEMENT_BYTES,
    "fp8": 1 + Fraction(4, 128),  # e4m3 byte + one fp32 scale per 128 elements of a row
}
# Elements along the reduction dimension that share one scale (D and F must be multiples).
BLOCK_ELEMENTS: dict[str, int] = {"mxfp8": 32, "nvfp4": 16, "fp8": 128}
