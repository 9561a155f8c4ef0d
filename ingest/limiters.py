"""The names a case's limiter takes (docs/metrics.md), in the order tables list them.

Standard library only: the command line's parser offers them as choices, and importing
``ingest.derived`` (pydantic, the schema) for a tuple of four names cost ``moescope --help``
most of its start-up."""

from __future__ import annotations

LIMITERS = ("compute", "hbm", "nvlink", "latency")
