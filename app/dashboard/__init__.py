"""The Dash dashboard, served by the service's own FastAPI app (Dash's FastAPI backend)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import dash
import plotly.io.json
from dash import Dash, dcc, html
from fastapi import FastAPI

from app.services.report_view import ReportCache

# CSS, the grid's cell renderers and the favicon; at the repository root, beside app/.
STATIC = Path(__file__).resolve().parents[2] / "static"


def report_cache() -> ReportCache:
    """The serving app's report cache (create_app made it), for the pages' reads."""
    cache: ReportCache = dash.get_app().server.state.report_cache  # type: ignore[no-untyped-call]
    return cache


def mount_dashboard(server: FastAPI) -> Dash:
    """Attach the dashboard to ``server``: pages at /, callbacks under /_dash-*."""
    # Dash encodes callback answers with plotly's JSON; its orjson path (picked when orjson
    # happens to be installed) first walks every value in Python and is ~3x slower here.
    plotly.io.json.config.default_engine = "json"
    dash_app = Dash(
        __name__,
        server=server,  # type: ignore[arg-type]  # dash types only Flask-style servers
        use_pages=True,
        assets_folder=str(STATIC),
        title="moescope",
        update_title=None,  # type: ignore[arg-type]  # None: keep the title while loading
        # Pages add their components after the first layout; their callbacks are valid.
        suppress_callback_exceptions=True,
    )
    dash_app.layout = html.Div([
        html.Header([
            dcc.Link("moescope", href="/", className="brand"),
            html.Nav([
                dcc.Link("Reports", href="/"),
                dcc.Link("Compare", href="/compare"),
                html.A("API", href="/docs"),
            ]),
        ], className="topbar"),
        html.Main(dash.page_container, className="content"),
    ])
    _set_up_now(dash_app)
    return dash_app


def _set_up_now(dash_app: Dash) -> None:
    """Run Dash's first-request set-up at start-up. Its FastAPI backend reads static/ and
    registers the pages router's callbacks on the first /_dash-* request, after the first
    page's HTML has gone out without them: the case table had no links and the browser
    logged an error on the first load after every start."""
    hooks = dash_app.backend._before_request_funcs  # type: ignore[attr-defined]  # no public way
    for hook in list(hooks):
        result = hook()
        if inspect.isawaitable(result):
            asyncio.run(_wait(result))


async def _wait(awaitable: Awaitable[Any]) -> None:
    await awaitable
