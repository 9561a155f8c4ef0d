"""/alerts[?state=&id=] — the alerts inbox: newest first, filtered by state; each alert's
why, its cases (each linking to its history) and links to its reports and their
comparison. A signed-in admin triages here (acknowledged, invalid: a false alarm,
fixed), with a reason; the log of who did what is shown on the alert."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

import dash
from dash import ALL, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from app.core.db import session_scope, transaction
from app.core.errors import Forbidden, NotFound, Unauthorized
from app.dashboard import links
from app.dashboard.components import not_found, table
from app.dashboard.signed_in import signed_in_token
from app.services import alerts
from app.services.alert_list import Alert
from app.services.history import history_path
from ingest.detector_limits import Limits

dash.register_page(__name__, path="/alerts", title="moescope: alerts", name="Alerts",
                   order=4)  # type: ignore[no-untyped-call]

TRIAGE = ("acknowledged", "invalid", "fixed")


def _state_links(chosen: str | None) -> html.Div:
    choices = [("all", None), *[(s, s) for s in alerts.STATES]]
    return html.Div([html.Span("state: "), *[
        html.B(label) if value == chosen else
        dcc.Link(label, href="/alerts" + (f"?{urlencode({'state': value})}" if value else ""))
        for label, value in choices]], className="links", id="alerts-states")


def _report_links(alert: Alert) -> list[Any]:
    a = alert.opened
    found: list[Any] = [dcc.Link(f"first bad report #{a.first_bad_report_id}",
                                 href=links.report_href(a.first_bad_report_id))]
    if a.last_good_report_id is not None:
        found += [" · ", dcc.Link(f"last good report #{a.last_good_report_id}",
                                  href=links.report_href(a.last_good_report_id)),
                  " · ", dcc.Link("compare them", href=links.compare_href(
                      a.last_good_report_id, a.first_bad_report_id))]
    return found


def _triage(alert: Alert) -> html.Div:
    return html.Div([
        dcc.Input(id={"type": "alert-reason", "alert": alert.id}, type="text",
                  placeholder="reason (required)", style={"minWidth": "18rem"}),
        *[html.Button(state, id={"type": "alert-triage", "alert": alert.id, "state": state},
                      className="alert-triage") for state in TRIAGE if state != alert.state],
    ], className="alert-triage-controls",
       style={"display": "flex", "gap": "0.5rem", "flexWrap": "wrap"})


def _percent(value: float | None, unit: str = " %") -> str:
    return "" if value is None else f"{value:.2g}{unit}"


def _detail(alert: Alert, limits: Mapping[str, Limits]) -> list[Any]:
    """One alert's cases (each with what the detector sees on its series) and its log,
    when it is shown alone."""
    a = alert.opened
    none = Limits(None, None, None)
    cases = [[dcc.Link(c.case_id, href=history_path(c.case_id, a.gpu, a.series)),
              f"{c.change_percent:+.1f} %",
              "" if c.phase_change_percent is None else f"{c.phase_change_percent:+.0f} %",
              _percent((seen := limits.get(c.case_id, none)).noise_percent),
              _percent(seen.smallest_step_percent),
              _percent(seen.false_alarms_per_1000, "")]
             for c in a.cases]
    events = [[f"{e.created_at:%Y-%m-%d %H:%M} UTC", e.created_by,
               f"{e.from_state} → {e.to_state}", e.reason] for e in alert.events]
    deliveries = [[f"{d.created_at:%Y-%m-%d %H:%M:%S} UTC", d.url, str(d.attempt),
                   str(d.status_code) if d.status_code is not None else d.error or ""]
                  for d in alert.deliveries]
    return [
        html.H3("Cases (each to its history)"),
        table(["case", "layer time", a.phase or "phase", "series noise",
               "smallest step caught", "false alarms per 1,000 points"], cases,
              id="alert-cases"),
        html.P("What the change points can see on each case's series: its run-to-run "
               "noise, the smallest step they catch at that noise, and the false alarms "
               "so far (its alerts triaged invalid). Empty: too few points to know.",
               className="muted"),
        *([html.H3("Triage log"), table(["when", "who", "state", "reason"], events,
                                        id="alert-events")] if events else []),
        *([html.H3("Webhook deliveries"), table(["when", "URL", "attempt", "answer"],
                                                deliveries, id="alert-deliveries")]
          if deliveries else []),
    ]


def _alert(alert: Alert, admin: str | None, alone: bool,
           limits: Mapping[str, Limits]) -> html.Article:
    a = alert.opened
    return html.Article([
        html.H2([dcc.Link(f"#{alert.id}", href=links.alert_href(alert.id)),
                 f" {a.direction}" + (f" in {a.phase}" if a.phase else ""),
                 " · ", html.Span(alert.state,
                                  className=f"alert-state alert-state-{alert.state}")]),
        html.P(a.why, className="alert-why"),
        html.Div([f"{a.gpu} · opened {alert.created_at:%Y-%m-%d %H:%M} UTC by report "
                  f"#{a.report_id} · ", *_report_links(alert)], className="links muted"),
        *([_triage(alert)] if admin else []),
        *(_detail(alert, limits) if alone else []),
    ], className="alert", id=f"alert-{alert.id}")


def _body(args: dict[str, Any], token: str | None, message: str | None = None) -> list[Any]:
    with session_scope() as session:
        try:
            found = alerts.inbox(session, token, args.get("state"), args.get("id"))
        except NotFound as exc:
            return [not_found(exc.detail)]
    alone = args.get("id") is not None
    help_line: Any = (message or f"signed in as {found.admin} (admin)") if found.admin else [
        "Triage needs an admin token: ", html.A("sign in", href="/login?next=" + quote(
            "/alerts" + (f"?{urlencode(args)}" if args else ""))), " with one."]
    shown = (f"{len(found.alerts)} of {found.total}" if found.total > len(found.alerts)
             else str(found.total))
    return [
        html.H1("Alerts"),
        html.P("One alert per change in one report, across every case it moved: a change "
               "point of the case's layer time that holds for five reports.",
               className="muted"),
        _state_links(args.get("state")),
        html.Div(help_line, className="muted", id="alerts-message"),
        html.P(f"{shown} alert(s), newest first" if not alone else "", id="alerts-count"),
        *[_alert(alert, found.admin, alone, found.limits) for alert in found.alerts],
    ]


def layout(state: str | None = None, id: str | None = None,  # noqa: A002
           **_: Any) -> html.Div:
    if state is not None and state not in alerts.STATES:
        return not_found(f"state {state!r}: one of {', '.join(alerts.STATES)}")
    if id is not None and not id.isdigit():
        return not_found(f"alert {id!r}: an alert's number")
    args: dict[str, Any] = {k: v for k, v in (("state", state), ("id", id and int(id)))
                            if v is not None}
    return html.Div([dcc.Store(id="alerts-args", data=args),
                     html.Div(_body(args, signed_in_token()), id="alerts-body")])


@dash.callback(Output("alerts-body", "children"),
               Input({"type": "alert-triage", "alert": ALL, "state": ALL}, "n_clicks"),
               State({"type": "alert-reason", "alert": ALL}, "value"),
               State({"type": "alert-reason", "alert": ALL}, "id"),
               State("alerts-args", "data"), prevent_initial_call=True)
def triage(_clicks: list[int | None], reasons: list[str | None], reason_ids: list[Any],
           args: dict[str, Any]) -> list[Any]:
    """Triage through the alerts service (which checks the signed-in token is an admin's),
    then redraw the inbox."""
    trigger = dash.ctx.triggered_id
    if not dash.ctx.triggered[0]["value"] or not isinstance(trigger, dict):
        raise PreventUpdate  # a button drawn anew, not clicked
    alert_id = int(trigger["alert"])
    reason = next((r for r, i in zip(reasons, reason_ids, strict=True)
                   if i["alert"] == alert_id), None) or ""
    token = signed_in_token()
    with session_scope() as session:
        try:
            with transaction(session):
                message = alerts.triage(session, token, alert_id, trigger["state"], reason)
        except (Unauthorized, Forbidden):
            message = "triage needs an admin token: sign in with one"
        except (NotFound, ValueError) as exc:
            message = str(exc)
    return _body(args, token, message)
