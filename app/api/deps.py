"""Request dependencies: the bearer-token scopes and the strict JSON body."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.sessions import SessionDep
from app.core.config import get_settings
from app.core.errors import UnsupportedMediaType
from app.models import TokenRow
from app.services.auth import COOKIE, authorise, presented_token
from app.services.report_view import ReportCache
from ingest.validate import parse_json

_bearer = HTTPBearer(auto_error=False, description="moescope API token (`moescope token create`)")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def require(scope: str) -> Callable[..., TokenRow]:
    # ``_credentials`` declares the bearer scheme in the OpenAPI document; the header itself
    # is read by presented_token, as the read gate reads it.
    def dependency(request: Request, session: SessionDep, _credentials: Credentials) -> TokenRow:
        return authorise(session, presented_token(request.headers.get("authorization"), None),
                         scope)

    return dependency


def read_access(request: Request, session: SessionDep,
                _credentials: Credentials) -> TokenRow | None:
    """Reads are open unless MOESCOPE_REQUIRE_READ_TOKEN is set. A browser signed in to the
    dashboard has its cookie instead of a bearer header: the pages' links to report.json
    and to the HTML export are reads too."""
    if not get_settings().require_read_token:
        return None
    token = presented_token(request.headers.get("authorization"), request.cookies.get(COOKIE))
    return authorise(session, token, "read")


def report_cache(request: Request) -> ReportCache:
    """The app's cache of recently read reports (create_app makes it)."""
    cache: ReportCache = request.app.state.report_cache
    return cache


def is_json_media_type(content_type: str) -> bool:
    """application/json or a ``+json`` type (parameters such as charset aside)."""
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/")
                                           and media.endswith("+json"))


async def json_body(request: Request) -> Any:
    """The body parsed strictly (NaN, Infinity and runaway nesting are rejected): FastAPI's
    own parsing accepts NaN and then cannot serialise its own error about it. Checked to
    be declared JSON first, so a form or a text file is not read as a report by chance."""
    content_type = request.headers.get("content-type")
    if content_type is None:
        raise UnsupportedMediaType("no Content-Type header: send the body as application/json")
    if not is_json_media_type(content_type):
        raise UnsupportedMediaType(
            f"Content-Type {content_type!r} is not accepted: send the body as application/json")
    return parse_json(await request.body())


IngestToken = Annotated[TokenRow, Depends(require("ingest"))]
AdminToken = Annotated[TokenRow, Depends(require("admin"))]
ReadAccess = Annotated[TokenRow | None, Depends(read_access)]
JsonBody = Annotated[Any, Depends(json_body)]
Reports = Annotated[ReportCache, Depends(report_cache)]
