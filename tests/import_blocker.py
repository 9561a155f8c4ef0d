"""Test-only: an interpreter that cannot import the given packages, as on a machine where
they are not installed. ``MOESCOPE_BLOCK_IMPORTS="fastapi,sqlalchemy"`` (top-level
names, comma-separated) installs it through tests/site/sitecustomize.py."""

from __future__ import annotations

import importlib.abc
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

ENV = "MOESCOPE_BLOCK_IMPORTS"


class Blocker(importlib.abc.MetaPathFinder):
    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r} (blocked by {ENV})",
                                      name=fullname)
        return None  # not ours: the next finder looks


def install() -> None:
    names = {n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip()}
    if names:
        sys.meta_path.insert(0, Blocker(names))
