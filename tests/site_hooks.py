"""Test-only start-up hooks for the interpreters tests launch: ``env_with_site`` puts
tests/site first on PYTHONPATH, so each such interpreter (the ``moescope`` process and
every rank it spawns) runs tests/site/sitecustomize.py, which installs the hooks whose
environment variables are set."""

from __future__ import annotations

import os
from pathlib import Path

SITE = Path(__file__).resolve().parent / "site"


def env_with_site(env: dict[str, str]) -> dict[str, str]:
    paths = [str(SITE), str(SITE.parent), env.get("PYTHONPATH", "")]
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
