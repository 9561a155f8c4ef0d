"""The matrix file: TOML describing the shape and the cases a run executes.

```toml
[shape]            # T, D, E, K (required)
T = 2048
D = 7168
E = 384
K = 6

[matrix]           # cross product; every key a list (a scalar is taken as a one-item list)
mode = ["inference", "training"]
ep = [8]
precision = ["bf16", "mxfp8"]
pipeline = ["standard", "staged"]
F = [3072]
imbalance = [1, 4]
category = "single_layer"

[[case]]           # single extra cases: every key of [matrix], scalars
mode = "training"
...

[timing]
windows = 10       # at least 10 by default: the p99 of iterationMS needs the samples
iterations = 30
warmup = 10        # iterations, and at least warmup_ms of them
warmup_ms = 200
flush_l2 = true    # zero a 256 MiB buffer before each timed iteration (default: inference)
timeout_s = 120    # the process group's timeout: how long a rank waits in a collective

capacity_factor = 8
seed = 0
ep1_group = false  # true: EP 1 cases still run their collectives, in a one-rank group

[dispatch]         # runner/exchange.py
mode = "static"    # or "dynamic": counts exchanged on the device and copied to the host
dedup = false      # true: one row per (token, destination rank), as DeepEP sends it


[peaks]            # optional overrides of the known-GPU table
tf = { bf16 = 989.0 }
hbm_gbps = 4800.0
nvlink_gbps_per_direction = 450.0
```

Errors name the key (``matrix.ep[1]``) and the reason.
"""

from __future__ import annotations

import itertools
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.spec import MODES, PIPELINES, PRECISIONS, CaseSpec, Shape, SpecError, check_spec

CASE_KEYS = ("mode", "ep", "precision", "pipeline", "F", "imbalance", "category")
TOP_KEYS = {"shape", "matrix", "case", "timing", "capacity_factor", "seed", "peaks",
            "ep1_group", "dispatch"}
DISPATCH_MODES = ("static", "dynamic")
PEAK_KEYS = {"tf", "hbm_gbps", "nvlink_gbps_per_direction"}
DEFAULT_WARMUP = 5
DEFAULT_WARMUP_MS = 200.0
# How long a rank waits in one collective of the layer (a dead peer's NCCL call ends
# there); the ranks outside a case wait for it on gloo, runner.side.CASE_WAIT_S.
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_WINDOWS = 10  # x 30 iterations: 300 samples for iterationMS's p99
TIMING_KEYS = ("windows", "iterations", "warmup", "warmup_ms", "flush_l2", "timeout_s")


class MatrixError(ValueError):
    """An invalid matrix file; the message starts with the offending key."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key


@dataclass(frozen=True)
class Timing:
    windows: int = DEFAULT_WINDOWS
    iterations: int = 30
    warmup: int = DEFAULT_WARMUP
    warmup_ms: float = DEFAULT_WARMUP_MS
    flush_l2: bool | None = None  # None: per mode, see flushes
    timeout_s: float = DEFAULT_TIMEOUT_S  # of the process group (init and new_group)

    def flushes(self, training: bool) -> bool:
        """Inference flushes L2 between timed iterations unless told otherwise; training
        does not (a step's own weights, activations and gradients exceed L2 anyway)."""
        return self.flush_l2 if self.flush_l2 is not None else not training


@dataclass(frozen=True)
class DispatchSettings:
    """How the layer exchanges its rows (runner.exchange): ``static`` (splits known on the
    host) or ``dynamic`` (counts exchanged on the device first); ``dedup``: one row per
    (token, destination rank)."""

    mode: str = "static"
    dedup: bool = False


@dataclass(frozen=True)
class Peaks:
    tf: dict[str, float] = field(default_factory=dict)
    hbm_gbps: float | None = None
    nvlink_gbps_per_direction: float | None = None


@dataclass(frozen=True)
class Matrix:
    shape: Shape
    cases: list[CaseSpec]
    timing: Timing = Timing()
    capacity_factor: int = 8
    # EP 1 cases run their collectives (all_to_all_single, functional collectives, NCCL in
    # CUDA graphs) in a one-rank group, instead of skipping them: the GPU check on one GPU.
    ep1_group: bool = False
    seed: int = 0
    peaks: Peaks = Peaks()
    dispatch: DispatchSettings = DispatchSettings()


def load_matrix(path: Path) -> Matrix:
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(str(path), f"not valid TOML: {exc}") from None
    return parse_matrix(data)


def parse_matrix(data: dict[str, Any]) -> Matrix:
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise MatrixError(unknown[0],
                          f"unknown key (expected one of {', '.join(sorted(TOP_KEYS))})")
    shape = _shape(_table(data, "shape", required=True))
    cases = _expand(_table(data, "matrix"))
    for i, table in enumerate(_case_tables(data)):
        cases.append(_case(table, f"case[{i}]"))
    if not cases:
        raise MatrixError("matrix", "no cases: give a [matrix] table or [[case]] tables")
    seen: dict[str, int] = {}
    for spec in cases:
        if spec.id in seen:
            raise MatrixError("case", f"duplicate case id {spec.id!r}")
        seen[spec.id] = 1
        try:
            check_spec(shape, spec)
        except SpecError as exc:
            raise MatrixError(f"{spec.id}.{str(exc).split(':')[0]}",
                              str(exc).split(": ", 1)[1]) from None
    return Matrix(
        shape=shape, cases=cases, timing=_timing(_table(data, "timing")),
        capacity_factor=_int(data, "capacity_factor", "capacity_factor", 8, minimum=1),
        seed=_int(data, "seed", "seed", 0, minimum=0),
        peaks=_peaks(_table(data, "peaks")),
        ep1_group=_bool(data, "ep1_group", "ep1_group", False),
        dispatch=_dispatch(_table(data, "dispatch")),
    )


def _dispatch(table: dict[str, Any]) -> DispatchSettings:
    unknown = sorted(set(table) - {"mode", "dedup"})
    if unknown:
        raise MatrixError(f"dispatch.{unknown[0]}", "unknown key (expected mode, dedup)")
    mode = table.get("mode", "static")
    if mode not in DISPATCH_MODES:
        raise MatrixError("dispatch.mode",
                          f"must be one of {', '.join(DISPATCH_MODES)}, got {mode!r}")
    return DispatchSettings(mode, _bool(table, "dedup", "dispatch.dedup", False))


def _bool(table: dict[str, Any], key: str, where: str, default: bool) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise MatrixError(where, f"must be true or false, got {value!r}")
    return value


def _table(data: dict[str, Any], key: str, required: bool = False) -> dict[str, Any]:
    if key not in data:
        if required:
            raise MatrixError(key, "required table is missing")
        return {}
    value = data[key]
    if not isinstance(value, dict):
        raise MatrixError(key, "must be a table")
    return value


def _case_tables(data: dict[str, Any]) -> list[dict[str, Any]]:
    value = data.get("case", [])
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise MatrixError("case", "must be an array of tables ([[case]])")
    return value


def _int(table: dict[str, Any], key: str, where: str, default: int | None = None,
         minimum: int = 1) -> int:
    if key not in table:
        if default is None:
            raise MatrixError(where, "required key is missing")
        return default
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise MatrixError(where, f"must be an integer, got {value!r}")
    if value < minimum:
        raise MatrixError(where, f"must be >= {minimum}, got {value}")
    return value


def _shape(table: dict[str, Any]) -> Shape:
    unknown = sorted(set(table) - {"T", "D", "E", "K"})
    if unknown:
        raise MatrixError(f"shape.{unknown[0]}", "unknown key (expected T, D, E, K)")
    return Shape(**{k: _int(table, k, f"shape.{k}") for k in ("T", "D", "E", "K")})


def _timing(table: dict[str, Any]) -> Timing:
    unknown = sorted(set(table) - set(TIMING_KEYS))
    if unknown:
        raise MatrixError(f"timing.{unknown[0]}",
                          f"unknown key (expected {', '.join(TIMING_KEYS)})")
    flush = _bool(table, "flush_l2", "timing.flush_l2", False) if "flush_l2" in table else None
    return Timing(
        windows=_int(table, "windows", "timing.windows", DEFAULT_WINDOWS),
        iterations=_int(table, "iterations", "timing.iterations", 30),
        warmup=_int(table, "warmup", "timing.warmup", DEFAULT_WARMUP, minimum=0),
        warmup_ms=(_non_negative_float(table["warmup_ms"], "timing.warmup_ms")
                   if "warmup_ms" in table else DEFAULT_WARMUP_MS),
        flush_l2=flush,
        timeout_s=(_positive_float(table["timeout_s"], "timing.timeout_s")
                   if "timeout_s" in table else DEFAULT_TIMEOUT_S),
    )


def _non_negative_float(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MatrixError(where, f"must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise MatrixError(where, f"must be a finite number >= 0, got {value!r}")
    return float(value)


def _positive_float(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MatrixError(where, f"must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise MatrixError(where, f"must be a finite number > 0, got {value!r}")
    return float(value)


def _peaks(table: dict[str, Any]) -> Peaks:
    unknown = sorted(set(table) - PEAK_KEYS)
    if unknown:
        raise MatrixError(f"peaks.{unknown[0]}",
                          f"unknown key (expected {', '.join(sorted(PEAK_KEYS))})")
    tf = table.get("tf", {})
    if not isinstance(tf, dict):
        raise MatrixError("peaks.tf", "must be a table of precision = TFLOP/s")
    for key in tf:
        if key not in PRECISIONS:  # a misspelt precision would override nothing, silently
            raise MatrixError(f"peaks.tf.{key}",
                              f"unknown precision (expected one of {', '.join(PRECISIONS)})")
    return Peaks(
        tf={str(k): _positive_float(v, f"peaks.tf.{k}") for k, v in tf.items()},
        hbm_gbps=(_positive_float(table["hbm_gbps"], "peaks.hbm_gbps")
                  if "hbm_gbps" in table else None),
        nvlink_gbps_per_direction=(
            _positive_float(table["nvlink_gbps_per_direction"], "peaks.nvlink_gbps_per_direction")
            if "nvlink_gbps_per_direction" in table else None),
    )


def _value(key: str, value: Any, where: str) -> Any:
    """One value of a case key, checked for type."""
    if key == "mode":
        if value not in MODES:
            raise MatrixError(where, f"must be one of {', '.join(MODES)}, got {value!r}")
        return value
    if key == "precision":
        if value not in PRECISIONS:
            raise MatrixError(where, f"must be one of {', '.join(PRECISIONS)}, got {value!r}")
        return value
    if key == "pipeline":
        if value not in PIPELINES:
            raise MatrixError(where, f"must be one of {', '.join(PIPELINES)}, got {value!r}")
        return value
    if key == "category":
        if not isinstance(value, str) or not value or "-" in value:
            raise MatrixError(where, f"must be a non-empty string without '-', got {value!r}")
        return value
    if key in ("ep", "F"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise MatrixError(where, f"must be an integer >= 1, got {value!r}")
        return value
    # imbalance
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MatrixError(where, f"must be a number >= 1, got {value!r}")
    if not math.isfinite(value) or value < 1:
        raise MatrixError(where, f"must be a finite number >= 1, got {value!r}")
    return float(value)


def _expand(table: dict[str, Any]) -> list[CaseSpec]:
    if not table:
        return []
    unknown = sorted(set(table) - set(CASE_KEYS))
    if unknown:
        raise MatrixError(f"matrix.{unknown[0]}",
                          f"unknown key (expected {', '.join(CASE_KEYS)})")
    axes: dict[str, list[Any]] = {}
    for key in CASE_KEYS:
        if key not in table:
            raise MatrixError(f"matrix.{key}", "required key is missing")
        raw = table[key]
        values = raw if isinstance(raw, list) else [raw]
        if not values:
            raise MatrixError(f"matrix.{key}", "must list at least one value")
        listed = isinstance(raw, list)
        axes[key] = [_value(key, v, f"matrix.{key}[{i}]" if listed else f"matrix.{key}")
                     for i, v in enumerate(values)]
    return [CaseSpec(**dict(zip(CASE_KEYS, combo, strict=True)))
            for combo in itertools.product(*(axes[k] for k in CASE_KEYS))]


def _case(table: dict[str, Any], where: str) -> CaseSpec:
    unknown = sorted(set(table) - set(CASE_KEYS))
    if unknown:
        raise MatrixError(f"{where}.{unknown[0]}",
                          f"unknown key (expected {', '.join(CASE_KEYS)})")
    values = {}
    for key in CASE_KEYS:
        if key not in table:
            raise MatrixError(f"{where}.{key}", "required key is missing")
        values[key] = _value(key, table[key], f"{where}.{key}")
    return CaseSpec(**values)
