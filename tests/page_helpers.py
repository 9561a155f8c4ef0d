"""The dashboard's pages as Dash imports them, and reading their component trees."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from dash.development.base_component import Component

from app.main import create_app


@pytest.fixture
def pages(settings_env: Callable[..., None]) -> dict[str, ModuleType]:
    create_app()
    return {name: importlib.import_module(f"app.dashboard.pages.{name}")
            for name in ("reports", "report", "case")}


def texts(component: Any) -> list[str]:
    if isinstance(component, str):
        return [component]
    if isinstance(component, list | tuple):
        return [t for c in component for t in texts(c)]
    if isinstance(component, Component):
        return texts(getattr(component, "children", None))
    return []


def find(component: Any, component_id: str) -> Any:
    if isinstance(component, list | tuple):
        for c in component:
            hit = find(c, component_id)
            if hit is not None:
                return hit
    if isinstance(component, Component):
        if getattr(component, "id", None) == component_id:
            return component
        return find(getattr(component, "children", None), component_id)
    return None
