"""/history?caseId=...&gpu=...[&series=&metric=&since=&until=] — one case across the
reports of its series on a time axis: the chosen metric (other cases overlaid: repeat
caseId), layer time's windows band and flagged reports, provenance changes and the admin's
marks, the older reports summarised, the points. A signed-in admin marks a report as a
step or an outlier here, and undoes it; the page redraws judged with the mark."""

from __future__ import annotations

from datetime import date
from typing import Any
from urllib.parse import quote

import dash
from dash import ALL, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from app.core.db import session_scope, transaction
from app.core.errors import Forbidden, NotFound, Unauthorized
from app.dashboard import links
from app.dashboard.alert_links import alert_links
from app.dashboard.components import GRAPH_CONFIG, not_found, table
from app.dashboard.signed_in import signed_in_token
from app.services import history_view, marks
from app.services.marks import MarkKind

dash.register_page(__name__, path="/history", title="moescope: history", name="History",
                   order=3)  # type: ignore[no-untyped-call]

POINT_COLUMNS = ["date", "report", "layer ms", "windows min – max ms", "window spread",
                 "useful TFLOP/s", "% of peak", "against the earlier points", "marked"]


def _date(name: str, value: str | None) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise NotFound(f"{name} {value!r} is not a date (YYYY-MM-DD)") from None


def _choices(label: str, choices: list[tuple[str, str, bool]]) -> html.Div:
    return html.Div([html.Span(f"{label}: "), *[
        html.B(text) if chosen else dcc.Link(text, href=href) for text, href, chosen in choices
    ]], className="links history-choices")


def _marks(view: history_view.HistoryView, admin: str | None) -> html.Div | None:
    items = [html.Li([html.B(f"report #{c['reportId']}"), f" ({c['date']}): ",
                      "; ".join(c["changes"])]) for c in view.changes]
    for m in view.marks:
        line: list[Any] = [html.B(f"report #{m['reportId']}"), f" ({m['date']}) marked ",
                           html.B(m["kind"]), f": {m['reason']} — {m['createdBy']}, "
                           f"{m['createdAt']:%Y-%m-%d %H:%M} UTC"]
        if admin:
            line += [" ", html.Button("undo", className="history-unmark", id={
                "type": "history-unmark", "report": m["reportId"], "kind": m["kind"]})]
        items.append(html.Li(line))
    if not items:
        return None
    return html.Div([html.H2("Provenance changes and marks"), html.Ul(items)],
                    id="history-marks")


def _mark_form(view: history_view.HistoryView, admin: str | None,
               message: str | None) -> html.Div:
    """An admin marks one of the drawn reports; anyone else is told what it takes."""
    if admin is None:
        return html.Div(["Marking a report as a step (a known change of level) or an outlier "
                         "needs an admin token: ",
                         html.A("sign in", href="/login?next=" + quote(view.href)),
                         " with one."], className="muted", id="history-mark-help")
    reports = [{"label": f"#{p['reportId']} · {p['date']}", "value": p["reportId"]}
               for p in reversed(view.points)]
    return html.Div([
        html.H2("Mark a report"),
        html.Div([
            dcc.Dropdown(id="history-mark-report", options=reports,
                         value=reports[0]["value"] if reports else None, clearable=False,
                         style={"minWidth": "16rem"}),
            dcc.RadioItems(id="history-mark-kind", value="step", inline=True, options=[
                {"label": " step: the level changed on purpose; baselines restart here",
                 "value": "step"},
                {"label": " outlier: a bad run; left out of every baseline",
                 "value": "outlier"}]),
            dcc.Input(id="history-mark-reason", type="text", placeholder="reason (required)",
                      maxLength=marks.REASON_MAX_CHARS, style={"minWidth": "20rem"}),
            html.Button("Mark", id="history-mark-save"),
        ], className="history-mark-controls",
           style={"display": "flex", "flexWrap": "wrap", "gap": "0.75rem",
                  "alignItems": "center"}),
        html.Div(message or f"signed in as {admin} (admin)", id="history-mark-message",
                 className="muted"),
    ], id="history-mark-form")


def _body(args: dict[str, Any], token: str | None, message: str | None = None) -> list[Any]:
    with session_scope() as session:
        try:
            page = history_view.history_page(
                session, args["caseIds"], args["gpu"], args["series"], args["metric"],
                _date("since", args["since"]), _date("until", args["until"]), token)
        except NotFound as exc:
            return [not_found(exc.detail)]
    view, admin, latest = page.view, page.admin, page.view.latest
    return [
        html.Div([dcc.Link(f"← case in report #{latest['reportId']}",
                           href=links.case_href(latest["reportId"], view.case_id))]
                 if latest else [], className="links"),
        html.Div([
            html.H1(view.case_id, id="history-case-id"),
            html.Div([html.Span(["GPU ", html.B(view.gpu)]),
                      html.Span(["shape ", html.B(page.shape)]),
                      html.Span(["reports ", html.B(str(view.total))]),
                      html.Span(page.shown)],
                     className="facts"),
        ], className="report-header"),
        html.Div(page.verdict, id="history-verdict",
                 className=f"verdict verdict-{latest['status'] if latest else 'none'}"),
        *([html.Div(f"why: {latest['why']}", id="history-why")]
          if latest and latest.get("why") else []),
        html.P(page.judged, className="muted"),
        html.P(page.limits, className="muted", id="history-limits"),
        *([html.P(page.changes, id="history-changes")] if page.changes else []),
        alert_links(page.alerts, "history-alerts"),
        _choices("metric", view.metric_links),
        _choices("range", view.range_links),
        *([html.Div([dcc.Link(text, href=href) for text, href in view.overlay_links],
                    className="links", id="history-overlay")] if view.overlay_links else []),
        *([html.P(f"Not in this series, not drawn: {', '.join(view.missing)}",
                  className="muted", id="history-missing")] if view.missing else []),
        *[html.Div(dcc.Graph(id=f"history-graph-{key}", figure=spec, config=GRAPH_CONFIG),
                   className="chart") for key, spec in view.specs.items()],
        *([mark_list] if (mark_list := _marks(view, admin)) else []),
        _mark_form(view, admin, message),
        html.H2("Points, newest first"),
        table(POINT_COLUMNS, page.rows, id="history-points"),
        *([html.Div(["Other shapes on this GPU: ",
                     *[dcc.Link(label, href=href) for label, href in view.other_series]],
                    className="links", id="history-other-series")]
          if view.other_series else []),
    ]


def layout(caseId: str | list[str] | None = None, gpu: str | None = None,  # noqa: N803
           series: str | None = None, metric: str | None = None, since: str | None = None,
           until: str | None = None, **_: Any) -> html.Div:
    case_ids = [caseId] if isinstance(caseId, str) else list(caseId or [])
    if not case_ids or not case_ids[0] or not gpu:
        return not_found("a history needs a case id and a GPU: /history?caseId=...&gpu=...")
    args = {"caseIds": case_ids, "gpu": gpu, "series": series or None,
            "metric": metric or "layerMS", "since": since, "until": until}
    return html.Div([dcc.Store(id="history-args", data=args),
                     html.Div(_body(args, signed_in_token()), id="history-body")])


@dash.callback(Output("history-body", "children"),
               Input("history-mark-save", "n_clicks"),
               Input({"type": "history-unmark", "report": ALL, "kind": ALL}, "n_clicks"),
               State("history-mark-report", "value"), State("history-mark-kind", "value"),
               State("history-mark-reason", "value"), State("history-args", "data"),
               prevent_initial_call=True)
def change_mark(_save: int | None, _undo: list[int | None], report_id: int | None,
                kind: MarkKind, reason: str | None, args: dict[str, Any]) -> list[Any]:
    """Put or undo a mark through the marks service (which checks the signed-in token is
    an admin's), then redraw the page: the verdicts, charts and list follow the mark."""
    trigger = dash.ctx.triggered_id
    if not dash.ctx.triggered[0]["value"] or trigger is None:
        raise PreventUpdate  # a button drawn anew, not clicked
    token = signed_in_token()
    if isinstance(trigger, dict):
        report_id, kind, reason = int(trigger["report"]), trigger["kind"], None
    elif report_id is None:
        return _body(args, token, "report: choose the report to mark")
    else:
        reason = reason or ""
    with session_scope() as session:
        try:
            with transaction(session):
                message = marks.change_mark(session, token, int(report_id), kind, reason)
        except (Unauthorized, Forbidden):
            message = "marking needs an admin token: sign in with one"
        except (NotFound, ValueError) as exc:
            message = str(exc)
    return _body(args, token, message)
