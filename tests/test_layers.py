"""The read side's layers, as ARCHITECTURE.md draws them, checked on the source: entry points
reach the repositories only through app/services, the export and the services import
nothing of the dashboard, the command line imports at its modules' tops, and no request
path changes the garbage collector."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

def modules(*folders: str) -> Iterator[tuple[str, ast.Module]]:
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            yield name, ast.parse(path.read_text("utf-8"), str(path))


def imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def under(names: set[str], package: str) -> set[str]:
    return {n for n in names if n == package or n.startswith(package + ".")}


def test_only_services_reach_the_repositories() -> None:
    offenders = {name: under(imported(tree), "app.repository")
                 for name, tree in modules("app", "cli")
                 if not name.startswith(("app.services", "app.repository"))}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_export_and_the_services_import_nothing_of_the_dashboard() -> None:
    offenders = {}
    for name, tree in modules("app/export", "app/services"):
        offenders[name] = under(imported(tree), "app.dashboard")
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_command_line_imports_at_its_modules_tops() -> None:
    local = [f"{name}:{node.lineno}" for name, tree in modules("cli")
             for function in ast.walk(tree)
             if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
             for node in ast.walk(function) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert local == []


def test_no_request_path_touches_the_garbage_collector() -> None:
    # app/main.py's start-up (the lifespan, before any request) is the one place allowed.
    offenders = [name for name, tree in modules("app", "cli")
                 if name != "app.main" and "gc" in imported(tree)]
    assert offenders == []
