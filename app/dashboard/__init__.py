"""The Dash dashboard, served by the service's own FastAPI app (Dash's FastAPI backend)."""

from __future__ import annotations

import re
from typing import Any

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


# Dash puts Babel's polyfill (core-js 2) before everything on every page. In today's browsers
# core-js 2 still judges the native array iterators and String.prototype.trim faulty and
# replaces them with its own JavaScript: every for-of, spread and trim in plotly.js, React
# and the renderer then ran through it, and the report page drew its charts in 1.3 x the
# time the same figures take on a plain page. Dash's bundles need from it only
# regeneratorRuntime (their lazy component loader), which static/vendor serves
# (`make regenerator-runtime`); every browser Dash supports has the rest.
_POLYFILL = re.compile(r'<script src="[^"]*/deps/polyfill@[^"]*"></script>\s*')


class Dashboard(Dash):
    def interpolate_index(self, metas: Any = "", title: Any = "", css: Any = "",
                          config: Any = "", scripts: Any = "", app_entry: Any = "",
                          favicon: Any = "", renderer: Any = "") -> Any:
        return super().interpolate_index(  # type: ignore[no-untyped-call]
            metas=metas, title=title, css=css, config=config,
            scripts=_POLYFILL.sub("", str(scripts)), app_entry=app_entry, favicon=favicon,
            renderer=renderer)


def mount_dashboard(server: FastAPI) -> Dash:
    """Attach the dashboard to ``server``: pages at /, callbacks under /_dash-*."""
    dash_app = Dashboard(
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
                dcc.Link("Platforms", href="/platforms"),
                dcc.Link("Alerts", href="/alerts"),
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
