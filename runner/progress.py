"""Rank 0's progress line per case: a tqdm bar on a terminal, plain lines otherwise (so
logs and CI output stay readable)."""

from __future__ import annotations

import sys
from typing import Any, TextIO


def progress_line(index: int, total: int, case_id: str, elapsed_s: float,
                  case: dict[str, Any] | None, problem: str | None = None) -> str:
    """``[i/n] id  time so far  headline``: the headline is useful TFLOP/s per GPU and
    the layer time, or why the case has none."""
    head = f"[{index}/{total}] {case_id}  {elapsed_s:7.1f} s"
    if case is None:
        return f"{head}  skipped: {problem}"
    error = case.get("numericalRelativeError")
    accepted = case.get("numericalAccepted")
    numerics = ("not checked" if accepted is None else
                f"{'ok' if accepted else 'NOT ACCEPTED'} ({error:.2e})")
    line = (f"{head}  {case['usefulTFPerGPU']:.4g} useful TF/GPU  layer "
            f"{case['layerMS']:.4g} ms  numerics {numerics}")
    if case.get("ooms"):
        line += f"  ooms {case['ooms']}"
    return line


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.bar: Any = None
        if self.stream.isatty():
            try:
                from tqdm import tqdm
            except ImportError:  # the runner extra brings it; plain lines without it
                return
            self.bar = tqdm(total=total, file=self.stream, unit="case", dynamic_ncols=True)

    def case(self, line: str, case_id: str) -> None:
        if self.bar is None:
            print(line, file=self.stream, flush=True)
            return
        self.bar.write(line, file=self.stream)  # above the bar: each case keeps its line
        self.bar.set_postfix_str(case_id)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
