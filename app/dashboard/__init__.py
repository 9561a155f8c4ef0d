"""The Dash dashboard, served by the service's own FastAPI app (Dash's FastAPI backend)."""

from __future__ import annotations

import dash
import httpx
from dash import Dash, dcc, html
from fastapi import FastAPI

from app.assets import STATIC
from app.services.report_view import ReportCache


def report_cache() -> ReportCache:
    """The serving app's report cache (create_app made it), for the pages' reads."""
    cache: ReportCache = dash.get_app().server.state.report_cache  # type: ignore[no-untyped-call]
    return cache


def mount_dashboard(server: FastAPI) -> Dash:
    """Attach the dashboard to ``server``: pages at /, callbacks under /_dash-*."""
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
    return dash_app


async def set_up_dashboard(server: FastAPI) -> None:
    """Have Dash set itself up before the first visitor: it reads static/ and registers the
    pages router's callbacks when it answers its first /_dash-* request, and a page served
    before that went out without them (the case table had no links, the browser logged an
    error on the first load after every start). One request of our own at start-up, through
    the app's public HTTP interface, is that first request."""
    transport = httpx.ASGITransport(app=server)
    async with httpx.AsyncClient(transport=transport, base_url="http://moescope") as client:
        await client.get("/_dash-layout")
