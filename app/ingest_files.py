"""``moescope ingest FILE...``: each file lands whole or not at all; a bad file is
reported with the same per-field problems as the API gives, and the rest still load."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.orm import Session

from app.core.db import engine_for
from app.core.errors import MoescopeError
from app.repository import reports as reports_repo
from ingest.validate import InvalidPayload, parse_json, validate_report


def ingest_files(
    files: list[Path], *, database_url: str | None, url: str | None, token: str | None
) -> int:
    """Returns the exit status: 0 when every file loaded, 1 otherwise."""
    failed = 0
    for path in files:
        try:
            body = path.read_bytes()
        except OSError as exc:
            print(f"{path}: cannot read: {exc.strerror}", file=sys.stderr)
            failed += 1
            continue
        if url:
            ok = _post(path, body, url, token or os.environ.get("MOESCOPE_TOKEN"))
        else:
            assert database_url is not None
            ok = _store(path, body, database_url)
        failed += not ok
    loaded = len(files) - failed
    print(f"{loaded} of {len(files)} file(s) loaded", file=sys.stderr)
    return 1 if failed else 0


def _store(path: Path, body: bytes, database_url: str) -> bool:
    try:
        raw = parse_json(body)
        report = validate_report(raw)
    except InvalidPayload as exc:
        _print_problems(path, [str(p) for p in exc.problems])
        return False
    with Session(engine_for(database_url)) as session:
        try:
            result = reports_repo.ingest_report(session, raw, report)
            session.commit()
        except MoescopeError as exc:
            print(f"{path}: {exc.detail}", file=sys.stderr)
            return False
    _print_result(path, result.id, result.case_count, result.created)
    return True


def _post(path: Path, body: bytes, url: str, token: str | None) -> bool:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        response = httpx.post(
            url.rstrip("/") + "/api/v1/reports", content=body, headers=headers, timeout=60
        )
    except httpx.HTTPError as exc:
        print(f"{path}: cannot reach {url}: {exc}", file=sys.stderr)
        return False
    answer: Any = _json_or_text(response)
    if response.status_code in (200, 201):
        _print_result(path, answer["id"], answer["caseCount"], answer["created"])
        return True
    detail = answer.get("detail") if isinstance(answer, dict) else answer
    if isinstance(detail, list):
        _print_problems(path, [f"{d.get('path') or '<root>'}: {d.get('msg')}" for d in detail])
    else:
        print(f"{path}: HTTP {response.status_code}: {detail}", file=sys.stderr)
    return False


def _json_or_text(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def _print_result(path: Path, report_id: int, case_count: int, created: bool) -> None:
    state = "stored" if created else "already stored"
    print(f"{path}: {state} as report {report_id} ({case_count} cases)")


def _print_problems(path: Path, problems: list[str]) -> None:
    print(f"{path}: rejected, {len(problems)} problem(s):", file=sys.stderr)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
