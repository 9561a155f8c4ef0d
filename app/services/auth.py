"""Token authorisation: the one check behind the API's token dependencies and the
dashboard's read gate. A request presents a token as a bearer header (scripts) or as the
dashboard's sign-in cookie (a browser cannot send a header)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.core.errors import Forbidden, Unauthorized
from app.models import TokenRow
from app.repository import tokens

# The HttpOnly cookie /login sets; the API's reads accept it too, so the pages' links to
# report.json and the export work in a signed-in browser.
COOKIE = "moescope_token"


def presented_token(authorization: str | None, cookie: str | None) -> str | None:
    """The token a request carries: its ``Authorization: Bearer`` header's, else the
    sign-in cookie's, else None."""
    scheme, _, credentials = (authorization or "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return cookie or None


def authorise(session: Session, token: str | None, needed: str) -> TokenRow:
    """The active token row, when ``token`` grants the ``needed`` scope; Unauthorized when
    it is missing, unknown or revoked, Forbidden when its scope is too narrow."""
    row = tokens.find_active(session, token) if token else None
    if row is None:
        raise Unauthorized()
    if not tokens.scope_allows(row.scope, needed):
        raise Forbidden(f"this token has scope {row.scope!r}; {needed!r} is required")
    return row


def admin_name(session: Session, token: str | None) -> str | None:
    """The token's name when it is active and grants admin, else None: whether the
    dashboard offers a signed-in person the controls that mark reports."""
    try:
        return authorise(session, token, "admin").name
    except (Unauthorized, Forbidden):
        return None
