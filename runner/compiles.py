"""torch.compile for the mega pipeline: compiled once per shape, counted and timed.

A case's routing (its imbalance) changes how many rows each rank receives and the split
sizes of its all-to-alls, not the layer's graph. So the layer is compiled with dynamic
shapes (``dynamic=True``) where routing enters it (the received rows, the split sizes,
the rows per expert), and static ones where the shape does (tokens, D, F, the weights:
``mark_static``), and the compiled callables are kept for the next case of the same shape
(``ShapeCache``). Only a new shape resets dynamo, which also keeps its per-function
recompile limit from being reached across shapes. A split of 0 or 1 rows is still
specialized by dynamo (it guards on those values) and compiles once more; at the limit
(``torch._dynamo.config.recompile_limit``) dynamo would silently run the frame eagerly,
so the runner asks it to raise instead (``fail_on_recompile_limit_hit``) and the
fallback is recorded in the case's notes like any compile failure.

``CompileLog`` counts the graphs dynamo compiled during a case and the seconds it spent
compiling (dynamo's own account, forward and backward: ``calculate_time_spent``), which
the report gives as ``compileS`` beside ``setupS``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import torch
import torch._dynamo
import torch._dynamo.utils

F = TypeVar("F", bound=Callable[..., torch.Tensor])
T = TypeVar("T")


def compiled_or_eager(fn: F, note: Callable[[str], None], dynamic: bool | None = False) -> F:
    """``torch.compile(fn)``, falling back to ``fn`` if compiling fails, e.g. where Triton
    is missing or dynamo reached its recompile limit: the rank warns, ``note`` gets the
    reason (the case's notes), and the case runs eagerly instead of crashing the run.
    Compiling happens at the first call, in the build's warm-up on every rank alike (same
    code, same shapes), so the ranks fall back together. Running out of memory is not a
    compile failure: it goes on to the OOM handling. Nor is a failure while a CUDA graph
    is captured: the capture is already broken, so it goes on to runner.graphs, which
    times the (still compiled) layer eagerly and says why."""
    compiled = torch.compile(fn, dynamic=dynamic)
    current: list[F] = [cast(F, compiled)]

    def call(*args: Any) -> torch.Tensor:
        try:
            return current[0](*args)
        except torch.OutOfMemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - any compiler failure
            if current[0] is fn or _capturing():
                raise
            message = _fallback_message(exc)
            print(f"warning: {message}", file=sys.stderr)
            note(message)
            current[0] = fn
            return fn(*args)

    return cast(F, call)


def _fallback_message(exc: Exception) -> str:
    if type(exc).__name__ == "FailOnRecompileLimitHit":
        limit = getattr(torch._dynamo.config, "recompile_limit", None)
        return (f"mega: torch.compile reached dynamo's recompile limit "
                f"(FailOnRecompileLimitHit: recompile_limit {limit}); the layer ran eagerly")
    return (f"mega: torch.compile failed ({type(exc).__name__}: {str(exc)[:200]}); the "
            f"layer ran eagerly")


def _capturing() -> bool:
    # torch.cuda.is_current_stream_capturing raises on a build without CUDA.
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def strict_recompiles() -> None:
    """Dynamo raises at its recompile limit instead of running the frame eagerly unseen
    (``compiled_or_eager`` records it), and sizes that happen to be equal are not made
    one symbol ("duck sizing": a balanced routing's received rows equal the rows sent,
    which would tie the compiled layer to balanced routings)."""
    if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
        torch._dynamo.config.fail_on_recompile_limit_hit = True
    import torch.fx.experimental._config as fx_config

    if hasattr(fx_config, "use_duck_shape"):
        fx_config.use_duck_shape = False


def static(*tensors: torch.Tensor | None) -> None:
    """Compile these tensors' sizes as constants (under ``dynamic=True``)."""
    for t in tensors:
        if t is not None:
            torch._dynamo.mark_static(t)


def dynamic_rows(*tensors: torch.Tensor | None) -> None:
    """Compile these tensors' first size (rows) as a symbol, their other sizes as
    constants."""
    for t in tensors:
        if t is not None:
            torch._dynamo.maybe_mark_dynamic(t, 0)
            for dim in range(1, t.dim()):
                torch._dynamo.mark_static(t, dim)


@dataclass
class ShapeCache(Generic[T]):
    """The compiled callables of the last shape: ``get`` returns them for the same key,
    else resets dynamo (the previous shape's code goes) and makes new ones. One shape at
    a time: the matrix varies the imbalance fastest, so its cases of one shape are
    consecutive."""

    key: tuple[Any, ...] | None = None
    value: T | None = None
    made: int = 0  # how many times ``make`` ran (a test counts them)

    def get(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        if self.value is None or key != self.key:
            self.key, self.value = None, None
            torch._dynamo.reset()
            self.value, self.key = make(), key
            self.made += 1
        return self.value


def _compile_totals() -> tuple[int, float]:
    graphs = int(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    seconds = float(torch._dynamo.utils.calculate_time_spent().get("total_wall_time", 0.0))
    return graphs, seconds


@dataclass
class CompileLog:
    """Graphs compiled and seconds spent compiling since ``start`` (a case's)."""

    base: tuple[int, float] = field(default=(0, 0.0))

    def start(self) -> None:
        self.base = _compile_totals()

    def read(self) -> tuple[int, float]:
        graphs, seconds = _compile_totals()
        return graphs - self.base[0], max(0.0, seconds - self.base[1])


COMPILES = CompileLog()
