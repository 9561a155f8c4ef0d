"""Who is signed in to the dashboard: the token in the sign-in cookie (``/login``) of the
request a callback answers. A page's layout is drawn by the pages router's callback, so it
sees the cookie too; called outside any request (a test drawing a layout), nobody is."""

from __future__ import annotations

import dash
from dash.exceptions import MissingCallbackContextException

from app.services.auth import COOKIE


def signed_in_token() -> str | None:
    try:
        cookies = dash.callback_context.cookies
    except MissingCallbackContextException:
        return None
    token = cookies.get(COOKIE)
    return str(token) if token else None
