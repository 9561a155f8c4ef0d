"""/history?caseId=...&gpu=...[&series=...] — one case across the reports of its series:
layer time with the windows' band and the flagged reports marked, throughput, the points."""

from __future__ import annotations

from typing import Any

import dash
from dash import dcc, html

from app.core.db import session_scope
from app.core.errors import NotFound
from app.dashboard import links
from app.dashboard.components import GRAPH_CONFIG, not_found, table
from app.services import history_view

dash.register_page(__name__, path="/history", title="moescope: history", name="History",
                   order=3)  # type: ignore[no-untyped-call]

POINT_COLUMNS = ["date", "report", "layer ms", "windows min – max ms", "window spread",
                 "useful TFLOP/s", "% of peak", "against the earlier points"]


def layout(caseId: str | None = None, gpu: str | None = None,  # noqa: N803
           series: str | None = None, **_: Any) -> html.Div:
    if not caseId or not gpu:
        return not_found("a history needs a case id and a GPU: /history?caseId=...&gpu=...")
    with session_scope() as session:
        try:
            view = history_view.history_view(session, caseId, gpu, series or None)
        except NotFound as exc:
            return not_found(exc.detail)
    latest = view.latest
    shape = ", ".join(f"{k}={v}" for k, v in view.fields.items() if k != "gpu")
    return html.Div([
        html.Div([dcc.Link(f"← case in report #{latest['reportId']}",
                           href=links.case_href(latest["reportId"], view.case_id))]
                 if latest else [], className="links"),
        html.Div([
            html.H1(view.case_id, id="history-case-id"),
            html.Div([html.Span(["GPU ", html.B(view.gpu)]),
                      html.Span(["shape ", html.B(shape)]),
                      html.Span(["reports ", html.B(str(len(view.points)))])],
                     className="facts"),
        ], className="report-header"),
        html.Div(history_view.verdict_line(latest) if latest else "",
                 id="history-verdict",
                 className=f"verdict verdict-{latest['status'] if latest else 'none'}"),
        html.P("Each report is judged against the median of up to 20 reports before it: "
               "flagged when it moved over 5 % and over the noise (the larger of the "
               "history's robust spread and the windows' spread).", className="muted"),
        *[html.Div(dcc.Graph(id=f"history-graph-{key}", figure=spec, config=GRAPH_CONFIG),
                   className="chart") for key, spec in view.specs.items()],
        html.H2("Points, newest first"),
        table(POINT_COLUMNS, history_view.history_rows(view.points), id="history-points"),
        *([html.Div(["Other shapes on this GPU: ",
                     *[dcc.Link(label, href=href) for label, href in view.other_series]],
                    className="links", id="history-other-series")]
          if view.other_series else []),
    ])
