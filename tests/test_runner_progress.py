"""The progress line per case: its content, plain lines off a terminal, tqdm on one."""

from __future__ import annotations

import io
from typing import Any

from runner.progress import Progress, progress_line

CASE: dict[str, Any] = {"usefulTFPerGPU": 123.456, "layerMS": 1.5,
                        "numericalAccepted": True, "numericalRelativeError": 3.2e-3, "ooms": 0}


def test_the_line_names_the_case_time_so_far_and_headline() -> None:
    line = progress_line(2, 5, "inference-ep8-bf16-standard-x-F64-i1", 12.34, CASE)
    assert line == ("[2/5] inference-ep8-bf16-standard-x-F64-i1     12.3 s  123.5 useful "
                    "TF/GPU  layer 1.5 ms  numerics ok (3.20e-03)")


def test_the_line_says_what_went_wrong() -> None:
    oom = {**CASE, "numericalAccepted": None, "numericalRelativeError": None, "ooms": 1}
    assert progress_line(1, 1, "c", 0.0, oom).endswith("numerics not checked  ooms 1")
    bad = {**CASE, "numericalAccepted": False}
    assert "numerics NOT ACCEPTED (3.20e-03)" in progress_line(1, 1, "c", 0.0, bad)
    assert progress_line(3, 4, "c", 1.0, None, "out of memory").endswith(
        "skipped: out of memory")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_off_a_terminal_and_a_bar_on_one() -> None:
    plain = io.StringIO()
    progress = Progress(2, plain)
    progress.case("[1/2] first", "first")
    progress.close()
    assert plain.getvalue() == "[1/2] first\n"  # nothing but the line: logs stay readable

    tty = Terminal()
    progress = Progress(2, tty)
    progress.case("[1/2] first", "first")
    progress.case("[2/2] second", "second")
    progress.close()
    shown = tty.getvalue()
    assert "[1/2] first\n" in shown and "[2/2] second\n" in shown
    assert "2/2" in shown.rsplit("second\n", 1)[1] and "\r" in shown  # the bar, redrawn
