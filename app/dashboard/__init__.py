"""The Dash dashboard, served by the service's own FastAPI app (Dash's FastAPI backend)."""

from __future__ import annotations

from pathlib import Path

import dash
import plotly.io.json
from dash import Dash, dcc, html
from fastapi import FastAPI

# CSS, the grid's cell renderers and the favicon; at the repository root, beside app/.
STATIC = Path(__file__).resolve().parents[2] / "static"


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
    return dash_app
