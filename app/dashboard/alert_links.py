"""The alerts a report, compare, history or case page shows: each alert's direction,
phase and state, linking to it on the alerts page, and its why; empty when none."""

from __future__ import annotations

from collections.abc import Sequence

from dash import dcc, html

from app.dashboard import links
from app.services.alert_list import Alert
from ingest.words import counted


def alert_label(alert: Alert) -> str:
    a = alert.opened
    where = f" in {a.phase}" if a.phase else ""
    return (f"#{alert.id} {a.direction}{where}, {counted(len(a.cases), 'case')}, "
            f"first bad report {a.first_bad_report_id} ({alert.state})")


def alert_links(alerts: Sequence[Alert], id: str) -> html.Div:  # noqa: A002
    """Each alert's link and its why, one line each (the why is the sentence the alert,
    the export and the webhook say)."""
    if not alerts:
        return html.Div(id=id)
    return html.Div([html.Span("Alerts", className="alert-links-title"), html.Ul([
        html.Li([dcc.Link(alert_label(alert), href=links.alert_href(alert.id)), ": ",
                 html.Span(alert.opened.why, className="alert-why")])
        for alert in alerts])], className="alert-links", id=id)
