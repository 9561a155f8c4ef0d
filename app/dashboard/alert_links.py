"""The line of alerts a report, compare, history or case page shows: each alert's
direction, phase and state, linking to it on the alerts page; empty when none."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dash import dcc, html

from app.dashboard import links
from app.services.alerts import Alert


def alert_label(alert: Alert) -> str:
    a = alert.opened
    where = f" in {a.phase}" if a.phase else ""
    return (f"#{alert.id} {a.direction}{where}, {len(a.cases)} case(s), "
            f"report {a.first_bad_report_id} ({alert.state})")


def alert_links(alerts: Sequence[Alert], id: str) -> html.Div:  # noqa: A002
    if not alerts:
        return html.Div(id=id)
    items: list[Any] = ["Alerts: "]
    for i, alert in enumerate(alerts):
        items += [*([" · "] if i else []), dcc.Link(alert_label(alert),
                                                    href=links.alert_href(alert.id))]
    return html.Div(items, className="links alert-links", id=id)
