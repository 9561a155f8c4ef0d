"""/ — the reports, newest first, searchable."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, dcc, html

from app.core.db import session_scope
from app.dashboard import links
from app.dashboard.components import percent, table
from app.services import report_list

dash.register_page(__name__, path="/", title="moescope: reports", name="Reports", order=0)  # type: ignore[no-untyped-call]


def empty_state() -> html.Div:
    return html.Div([
        html.H2("No reports yet"),
        html.P("Load a report file into this server's database, or post it over HTTP "
               "(an ingest token comes from `moescope token create NAME --scope ingest`):"),
        html.Pre("\n".join(["export MOESCOPE_URL=<this server's URL>",
                            *report_list.load_commands("$MOESCOPE_URL")]),
                 id="reports-load-commands"),
        html.P(["Or start a demo: ", html.Code("moescope serve --demo"), "."]),
    ], className="empty")


def reports_table(rows: list[dict[str, Any]]) -> html.Div | html.Table:
    if not rows:
        return html.Div("No report matches the search.", className="muted")
    # The report number and run id tell apart reports of the same day, GPU and source.
    header = ["report", "date", "GPU", "run id", "source", "cases", "best % of peak",
              "ingested at", "compare"]
    body = [[
        dcc.Link(f"#{row['id']}", href=links.report_href(row["id"])),
        row["date"], row["gpu"], row["runId"], row["source"], str(row["caseCount"]),
        percent(row["bestPercentOfPeak"]), row["ingestedAt"],
        dcc.Link(f"with previous #{row['previousId']}",
                 href=links.compare_href(row["previousId"], row["id"]))
        if row["previousId"] is not None else "",
    ] for row in rows]
    return table(header, body, id="reports-table")


def layout(q: str | None = None, **_: Any) -> html.Div:
    with session_scope() as session:
        if report_list.report_count(session) == 0:
            return html.Div([html.H1("Reports"), empty_state()])
        rows = report_list.report_list(session, q)
    return html.Div([
        html.H1("Reports"),
        dcc.Input(id="reports-search", type="search", value=q or "", debounce=0.3,
                  placeholder="search GPU, source, date, run id", className="search"),
        html.Div(reports_table(rows), id="reports-list"),
    ])


@callback(Output("reports-list", "children"), Input("reports-search", "value"),
          prevent_initial_call=True)
def search(q: str | None) -> html.Div | html.Table:
    with session_scope() as session:
        return reports_table(report_list.report_list(session, q))
