"""``moescope ingest FILE... --url``: the loop over the files, what it prints, and the post
through runner/http.py. It imports neither SQLAlchemy nor FastAPI, so it works where only
the runner is installed; loading straight into a database (cli/ingest_database.py) hands
its store function to the same loop."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from runner.http import Poster, Unreachable, resolve_token

# Loads one file's bytes; False when the file was refused (and the reason printed).
Load = Callable[[Path, bytes], bool]


def run(args: argparse.Namespace) -> int:
    return post_files(args.files, args.url, args.token, args.deadline)


def load_files(files: list[Path], load: Load) -> int:
    """Each file loads whole or not at all; a bad file does not stop the rest. Returns the
    exit status: 0 when every file loaded, 1 otherwise."""
    failed = 0
    for path in files:
        try:
            body = path.read_bytes()
        except OSError as exc:
            print(f"{path}: cannot read: {exc.strerror}", file=sys.stderr)
            failed += 1
            continue
        failed += not load(path, body)
    print(f"{len(files) - failed} of {len(files)} file(s) loaded", file=sys.stderr)
    return 1 if failed else 0


def post_files(files: list[Path], url: str, token: str | None, deadline_s: float) -> int:
    poster = Poster(url, resolve_token(token))
    return load_files(files, lambda path, body: _post(path, body, poster, deadline_s))


def _post(path: Path, body: bytes, poster: Poster, deadline_s: float) -> bool:
    try:
        posted = poster.post("/api/v1/reports", body, deadline_s)
    except Unreachable as exc:
        print(f"{path}: cannot reach {poster.url}: {exc}", file=sys.stderr)
        return False
    response = posted.response
    answer: Any = _json_or_text(response)
    if response.status_code in (200, 201):
        print_result(path, answer["id"], answer["caseCount"], answer["created"])
        return True
    detail = answer.get("detail") if isinstance(answer, dict) else answer
    if isinstance(detail, list):
        print_problems(path, [f"{d.get('path') or '<root>'}: {d.get('msg')}" for d in detail])
    else:
        gave_up = f" (gave up after {posted.attempts} attempt(s))" if posted.gave_up else ""
        print(f"{path}: HTTP {response.status_code}: {detail}{gave_up}", file=sys.stderr)
    return False


def _json_or_text(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def print_result(path: Path, report_id: int, case_count: int, created: bool) -> None:
    state = "stored" if created else "already stored"
    print(f"{path}: {state} as report {report_id} ({case_count} cases)")


def print_problems(path: Path, problems: list[str]) -> None:
    print(f"{path}: rejected, {len(problems)} problem(s):", file=sys.stderr)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
