"""/docs (Swagger UI) and /redoc with their assets served by the app, not a CDN: GPU
clusters are often air-gapped, and the docs must work there. The assets are vendored in
docs_assets/ (``make docs-assets`` refreshes them, the versions are in the Makefile)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(__file__).resolve().parent / "docs_assets"
ASSETS_URL = "/docs-assets"


def mount_docs(app: FastAPI, openapi_url: str) -> None:
    # Under /docs-assets, which the read gate leaves open like /docs itself.
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")
    title = f"{app.title} API"

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url, title=title,
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon-32x32.png",
            # No badge that asks validator.swagger.io about the spec.
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url, title=title,
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_URL}/favicon-32x32.png",
            with_google_fonts=False,
        )
