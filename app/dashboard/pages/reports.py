"""/ — the reports, newest first, searchable, a page at a time (every report reachable,
the total shown)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

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
        row["date"], row["gpu"], row["runId"], row["source"], _cases(row),
        percent(row["bestPercentOfPeak"]), row["ingestedAt"],
        dcc.Link(f"with previous #{row['previousId']}",
                 href=links.compare_href(row["previousId"], row["id"]))
        if row["previousId"] is not None else "",
    ] for row in rows]
    return table(header, body, id="reports-table")


def _cases(row: dict[str, Any]) -> html.Span | str:
    """The case count, and the data errors among them (left out of the best)."""
    errors = row["dataErrorCount"]
    if not errors:
        return str(row["caseCount"])
    return html.Span([str(row["caseCount"]), " ", html.Span(
        f"({errors} data error{'s' if errors > 1 else ''})", className="data-errors",
        title="cases caveated above_peak, numerical_not_accepted or failed: left out of "
              "the best % of peak")])


PER_PAGE = 50


def _page_href(q: str | None, page: int) -> str:
    query = {**({"q": q} if q else {}), **({"page": str(page)} if page > 1 else {})}
    return "/" + (f"?{urlencode(query)}" if query else "")


def pager(q: str | None, page: int, total: int) -> html.Div:
    """Where this page lies among every matching report, and links to the others."""
    pages = max(1, -(-total // PER_PAGE))
    first = (page - 1) * PER_PAGE + 1
    shown = (f"reports {first:,}–{min(total, page * PER_PAGE):,} of {total:,}"
             if total and page <= pages else f"{total:,} reports; no page {page}")
    steps = [("« newest", 1), ("‹ newer", page - 1), ("older ›", page + 1),
             ("oldest »", pages)]
    return html.Div([html.Span(shown, id="reports-count"), *[
        dcc.Link(text, href=_page_href(q, target)) if 1 <= target <= pages and target != page
        else html.Span(text, className="muted") for text, target in steps
    ], html.Span(f"page {min(page, pages)} of {pages}")], className="links pager")


def reports_page(q: str | None, page: int) -> list[Any]:
    with session_scope() as session:
        rows, total = report_list.listed_page(session, q, page, PER_PAGE)
    return [pager(q, page, total), reports_table(rows)]


def _page_number(page: str | None) -> int:
    try:
        return max(1, int(page or 1))
    except ValueError:
        return 1


def layout(q: str | None = None, page: str | None = None, **_: Any) -> html.Div:
    with session_scope() as session:
        if report_list.report_count(session) == 0:
            return html.Div([html.H1("Reports"), empty_state()])
    return html.Div([
        html.H1("Reports"),
        html.Div(dcc.Link("Across hardware: the newest report of each GPU side by side",
                          href="/platforms", id="reports-platforms-link"), className="links"),
        dcc.Input(id="reports-search", type="search", value=q or "", debounce=0.3,
                  placeholder="search GPU, source, date, run id", className="search"),
        html.Div(reports_page(q, _page_number(page)), id="reports-list"),
    ])


@callback(Output("reports-list", "children"), Input("reports-search", "value"),
          prevent_initial_call=True)
def search(q: str | None) -> list[Any]:
    return reports_page(q, 1)
