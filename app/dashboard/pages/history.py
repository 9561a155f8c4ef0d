"""/history?caseId=...&gpu=...[&series=&metric=&since=&until=] — one case across the
reports of its series on a time axis: the chosen metric (other cases overlaid: repeat
caseId), layer time's windows band and flagged reports, provenance changes and the admin's
marks, the older reports summarised, the points."""

from __future__ import annotations

from datetime import date
from typing import Any

import dash
from dash import dcc, html

from app.core.db import session_scope
from app.core.errors import NotFound
from app.dashboard import links
from app.dashboard.components import GRAPH_CONFIG, not_found, table
from app.services import history_view
from ingest.regressions import DEFAULT_THRESHOLD_PERCENT, DEFAULT_WINDOW

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


def _marks(view: history_view.HistoryView) -> html.Div | None:
    items = [html.Li([html.B(f"report #{c['reportId']}"), f" ({c['date']}): ",
                      "; ".join(c["changes"])]) for c in view.changes]
    items += [html.Li([html.B(f"report #{m['reportId']}"), f" ({m['date']}) marked ",
                       html.B(m["kind"]), f": {m['reason']} — {m['createdBy']}, "
                       f"{m['createdAt']:%Y-%m-%d %H:%M} UTC"]) for m in view.marks]
    if not items:
        return None
    return html.Div([html.H2("Provenance changes and marks"), html.Ul(items)],
                    id="history-marks")


def layout(caseId: str | list[str] | None = None, gpu: str | None = None,  # noqa: N803
           series: str | None = None, metric: str | None = None, since: str | None = None,
           until: str | None = None, **_: Any) -> html.Div:
    case_ids = [caseId] if isinstance(caseId, str) else list(caseId or [])
    if not case_ids or not case_ids[0] or not gpu:
        return not_found("a history needs a case id and a GPU: /history?caseId=...&gpu=...")
    with session_scope() as session:
        try:
            view = history_view.history_view(
                session, case_ids, gpu, series or None, metric or "layerMS",
                _date("since", since), _date("until", until))
        except NotFound as exc:
            return not_found(exc.detail)
    latest = view.latest
    shape = ", ".join(f"{k}={v}" for k, v in view.fields.items() if k != "gpu")
    shown = f"{len(view.points)} newest in full" + (
        f", {view.total - len(view.points)} older in {len(view.buckets)} buckets"
        if view.buckets else "")
    return html.Div([
        html.Div([dcc.Link(f"← case in report #{latest['reportId']}",
                           href=links.case_href(latest["reportId"], view.case_id))]
                 if latest else [], className="links"),
        html.Div([
            html.H1(view.case_id, id="history-case-id"),
            html.Div([html.Span(["GPU ", html.B(view.gpu)]),
                      html.Span(["shape ", html.B(shape)]),
                      html.Span(["reports ", html.B(str(view.total))]),
                      html.Span(shown)],
                     className="facts"),
        ], className="report-header"),
        html.Div(history_view.verdict_line(latest) if latest else "",
                 id="history-verdict",
                 className=f"verdict verdict-{latest['status'] if latest else 'none'}"),
        *([html.Div(f"why: {latest['why']}", id="history-why")]
          if latest and latest.get("why") else []),
        html.P(f"Each report is judged against the median of up to {DEFAULT_WINDOW} reports "
               f"before it: flagged when it moved over {DEFAULT_THRESHOLD_PERCENT:g} % and "
               "over the noise (the larger of the "
               "history's robust spread and the windows' spread). A report an admin marked "
               "as a step starts a new baseline; one marked as an outlier is left out of "
               "every baseline.", className="muted"),
        _choices("metric", view.metric_links),
        _choices("range", view.range_links),
        *([html.Div([dcc.Link(text, href=href) for text, href in view.overlay_links],
                    className="links", id="history-overlay")] if view.overlay_links else []),
        *([html.P(f"Not in this series, not drawn: {', '.join(view.missing)}",
                  className="muted", id="history-missing")] if view.missing else []),
        *[html.Div(dcc.Graph(id=f"history-graph-{key}", figure=spec, config=GRAPH_CONFIG),
                   className="chart") for key, spec in view.specs.items()],
        *([mark_list] if (mark_list := _marks(view)) else []),
        html.H2("Points, newest first"),
        table(POINT_COLUMNS, history_view.history_rows(view.points), id="history-points"),
        *([html.Div(["Other shapes on this GPU: ",
                     *[dcc.Link(label, href=href) for label, href in view.other_series]],
                    className="links", id="history-other-series")]
          if view.other_series else []),
    ])
