"""The on-disk spool: every case is written here before it is posted, and removed once the
service has it. A runner killed mid-matrix therefore loses at most the case in flight,
and a service that is down loses nothing: the next run or ``moescope runner flush``
resends it (the service dedups by runId and case id, so resending is harmless).

Layout, one folder per run::

    <spool>/<run folder>/meta.json        {"url": ..., "meta": {...}}
    <spool>/<run folder>/case-000007.json  one case, as posted
    <spool>/rejected/<run folder>/...      what the service refused for good (422, 409)

Every file is written to a temporary name and renamed (``os.replace``), so a reader
never sees half a file. The spool is bounded (``max_bytes``); a write that would exceed
it raises ``SpoolFull`` rather than dropping anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
REJECTED = "rejected"


class SpoolError(RuntimeError):
    pass


class SpoolFull(SpoolError):
    def __init__(self, root: Path, used: int, needed: int, limit: int) -> None:
        super().__init__(
            f"spool {root} is full: {used} bytes held, {needed} more needed, limit {limit} "
            f"(resend with `moescope runner flush`, or raise MOESCOPE_SPOOL_MAX_MB)")


def default_spool_dir() -> Path:
    env = os.environ.get("MOESCOPE_SPOOL")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "moescope" / "spool"


def default_max_bytes() -> int:
    env = os.environ.get("MOESCOPE_SPOOL_MAX_MB")
    return int(float(env) * 1024 * 1024) if env else DEFAULT_MAX_BYTES


def run_folder(run_id: str) -> str:
    """A file-system-safe folder name, unique per runId even after sanitising."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)[:80]
    return f"{safe}-{hashlib.sha256(run_id.encode()).hexdigest()[:8]}"


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class PendingRun:
    folder: Path
    url: str | None
    meta: dict[str, Any]
    case_files: list[Path]

    @property
    def run_id(self) -> str:
        return str(self.meta.get("runId", ""))

    def cases(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_bytes()) for p in self.case_files]


class Spool:
    def __init__(self, root: Path, max_bytes: int | None = None) -> None:
        self.root = root
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes

    def used_bytes(self) -> int:
        if not self.root.exists():
            return 0
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())

    def _write(self, path: Path, value: Any) -> None:
        data = json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8")
        used = self.used_bytes()
        if used + len(data) > self.max_bytes:
            raise SpoolFull(self.root, used, len(data), self.max_bytes)
        write_atomic(path, data)

    def put_meta(self, run_id: str, url: str | None, meta: dict[str, Any]) -> Path:
        folder = self.root / run_folder(run_id)
        path = folder / "meta.json"
        if not path.exists():
            self._write(path, {"url": url, "meta": meta})
        return folder

    def put_case(self, run_id: str, url: str | None, meta: dict[str, Any],
                 case: dict[str, Any]) -> Path:
        folder = self.put_meta(run_id, url, meta)
        numbers = [int(p.stem.split("-")[1]) for p in folder.glob("case-*.json")]
        path = folder / f"case-{max(numbers, default=-1) + 1:06d}.json"
        self._write(path, case)
        return path

    def pending(self) -> Iterator[PendingRun]:
        if not self.root.exists():
            return
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir() and p.name != REJECTED):
            yield self.pending_run(folder)

    def pending_run(self, folder: Path) -> PendingRun:
        meta_file = folder / "meta.json"
        if not meta_file.exists():
            raise SpoolError(f"{folder} holds cases without meta.json: cannot resend them")
        head = json.loads(meta_file.read_bytes())
        return PendingRun(folder, head.get("url"), head["meta"],
                          sorted(folder.glob("case-*.json")))

    def delivered(self, run: PendingRun, case_files: list[Path]) -> None:
        """The service holds these cases: forget them, and the run once it is empty."""
        for path in case_files:
            path.unlink(missing_ok=True)
        if not any(run.folder.glob("case-*.json")):
            (run.folder / "meta.json").unlink(missing_ok=True)
            for leftover in run.folder.glob(".tmp-*"):
                leftover.unlink(missing_ok=True)
            run.folder.rmdir()

    def reject(self, run: PendingRun, case_files: list[Path], reason: str) -> Path:
        """The service refused these for good: keep them aside, with the reason."""
        target = self.root / REJECTED / run.folder.name
        target.mkdir(parents=True, exist_ok=True)
        write_atomic(target / "meta.json", (run.folder / "meta.json").read_bytes())
        for path in case_files:
            os.replace(path, target / path.name)
        write_atomic(target / "reason.txt", reason.encode("utf-8"))
        self.delivered(run, [])
        return target
