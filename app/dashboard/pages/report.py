"""/reports/<id> — one report: header, filters (kept in the URL), the configuration matrix,
eleven charts each with the notes and caveats that qualify it, the notes panel, the case
table, CSV."""

from __future__ import annotations

from typing import Any

import dash
from dash import (
    ClientsideFunction,
    Input,
    Output,
    State,
    callback,
    clientside_callback,
    dcc,
    html,
)

from app import figures
from app.case_fields import FILTERABLE
from app.core.db import session_scope
from app.core.errors import NotFound
from app.dashboard import (
    caveat_list,
    cross_links,
    filters,
    links,
    matrix_table,
    moved_cases,
    report_cache,
    shown,
    summary_table,
)
from app.dashboard.alert_links import alert_links
from app.dashboard.case_grid import TABLE_HEIGHT, case_grid
from app.dashboard.chart_rows import absent_lines, chart_notes, chart_rows, drawn_text
from app.dashboard.components import (
    caveat_badges,
    not_found,
    note_block,
    parse_report_id,
    style_legend,
)
from app.dashboard.report_header import filter_controls, header, provenance_line
from app.services import case_table, report_view
from app.services.against_history import ReportMarks
from app.services.matrix import report_matrix
from app.services.report_page import FACTS_KEPT, ReportChoices, ReportPage, report_page

dash.register_page(__name__, path_template="/reports/<report_id>",
                   title="moescope: report", name="Report", order=2)  # type: ignore[no-untyped-call]

def layout(report_id: str | None = None, **query: Any) -> html.Div:
    rid = parse_report_id(report_id)
    choices = ReportChoices(matrix_metric=query.get("matrixMetric"), url_query=query)
    with session_scope() as session:
        try:
            if rid is None:
                raise NotFound(f"report {report_id} does not exist")
            page = report_page(report_cache(), session, rid,
                               filters.filters_from_query(query), choices)
        except NotFound as exc:
            return not_found(exc.detail)
    parts = view_parts(page)
    parts["report-url-problems.hidden"] = not page.problems
    view = page.view
    return html.Div([
        dcc.Store(id="report-id", data=rid),
        dcc.Store(id="report-history-marks", data=page.marks.store()),
        dcc.Store(id="report-search", data=parts["report-search.data"]),
        dcc.Store(id="report-search-applied"),
        dcc.Store(id="report-shown", data=shown.digests([parts[n] for n in DIGESTED])),
        # A filter change's figures (those that changed, by chart) go here first;
        # static/lazy_parts.js draws each when its chart is in or near the window.
        dcc.Store(id="report-figures"),
        header(view.header, parts["report-export-link.href"]),
        provenance_line(page.facts.host, rid, page.facts.previous),
        cross_links.compare_with(rid, list(page.facts.other_gpus)),
        alert_links(page.facts.alerts, "report-alerts"),
        html.Div([html.P(p) for p in page.problems], id="report-url-problems",
                 className="url-problems", hidden=not page.problems),
        filter_controls(page.options, view.filters),
        html.Div(parts["report-count.children"], id="report-count", className="count"),
        html.Div(parts["report-empty.children"], id="report-empty", className="empty-hint",
                 hidden=parts["report-empty.hidden"]),
        html.Div(parts["report-cap-banner.children"], id="report-cap-banner",
                 className="cap-banner", hidden=parts["report-cap-banner.hidden"]),
        matrix_table.matrix_section(parts["report-matrix.children"], page.metric),
        html.Details([html.Summary("Summary per mode x precision x pipeline"),
                      html.Div(parts["report-summary.children"], id="report-summary")],
                     open=True, className="summary-section"),
        moved_cases.moved_cases_section(page.history),
        html.Div(parts["report-legend.children"], id="report-legend",
                 className="style-legend"),
        # An empty view draws no empty axes: the hint above says what to relax.
        html.Div(chart_rows(view.panels, parts), id="report-charts",
                 hidden=parts["report-charts.hidden"]),
        html.Section([html.H2("Report notes"), *[note_block(n) for n in page.notes]],
                     id="report-notes", className="notes-panel"),
        html.Section([html.H2("Caveats of the cases in view"),
                      html.Div(parts["report-caveat-list.children"], id="report-caveat-list")],
                     id="report-caveats", className="notes-panel"),
        html.Section([
            html.H2("Cases"),
            dcc.Store(id="report-table-wanted"), dcc.Store(id="report-rows-wanted"),
            # Built once the charts are drawn (mount_table); a filter's rows come when it
            # is near the window (table_rows).
            html.Div(id="report-table", style={"minHeight": TABLE_HEIGHT}),
        ], className="cases", id="report-cases"),
    ])


# The figure of a chart left out of the view (its row hidden, a line says why): plotly
# would draw the whole chart, unseen, on every filter change. The same empty figure each
# time, so it is not sent again until the chart is back.
NOT_DRAWN: dict[str, Any] = {"data": [], "layout": {"showlegend": False}}  # as every chart here


def view_parts(page: ReportPage) -> dict[str, Any]:
    """Every part of the page that the filters change, by output (``id.property``): what
    the page is drawn with, and what the filter callback sends."""
    view, report_id = page.view, page.report_id
    parts: dict[str, Any] = {}
    for p in view.panels:
        parts.update({
            f"report-figure-{p.key}.data": NOT_DRAWN if p.absent else p.figure,
            f"report-aside-{p.key}-drawn.children": drawn_text(p),
            f"report-aside-{p.key}-notes.children": chart_notes(p),
            f"report-aside-{p.key}-caveats.children": caveat_badges(p.caveats),
            f"report-chart-{p.key}.hidden": bool(p.absent),
        })
    parts.update({
        "report-matrix.children": matrix_table.matrix_table(report_id, page.matrix),
        "report-count.children": view.count_text,
        "report-cap-banner.children": view.banner, "report-cap-banner.hidden": not view.banner,
        "report-search.data": filters.search_from_filters(view.filters),
        "report-legend.children": style_legend(view.charted),
        "report-export-link.href": links.report_export_href(report_id, view.filters, page.metric),
        "report-moved-list.children": moved_cases.moved_list(page.history),
        "report-empty.children": page.hint, "report-empty.hidden": not page.hint,
        "report-charts.hidden": bool(page.hint),
        "report-summary.children": summary_table.summary_table(page.summary),
        "report-caveat-list.children": caveat_list.caveat_list(report_id, view.cases),
        "report-absent-charts.children": absent_lines(view.panels),
        # A filter chosen in the page replaces the URL's: its problems no longer apply.
        "report-url-problems.hidden": True,
        **{f"report-filter-{f.wire}.options": page.options[f.wire] for f in FILTERABLE},
    })
    return parts


PARTS: list[str] = [
    *(part for c in figures.CHARTS for part in (
        f"report-aside-{c.key}-drawn.children",
        f"report-aside-{c.key}-notes.children", f"report-aside-{c.key}-caveats.children",
        f"report-chart-{c.key}.hidden")),
    "report-matrix.children", "report-count.children",
    "report-cap-banner.children", "report-cap-banner.hidden", "report-search.data",
    "report-legend.children", "report-export-link.href", "report-moved-list.children",
    "report-empty.children", "report-empty.hidden", "report-charts.hidden",
    "report-summary.children", "report-caveat-list.children",
    "report-absent-charts.children", "report-url-problems.hidden",
    *(f"report-filter-{f.wire}.options" for f in FILTERABLE),
]


def _output(part: str) -> Output:
    component, prop = part.rsplit(".", 1)
    return Output(component, prop)


# Every chart's figure, sent in one store (one store update in Dash's renderer, not one a
# chart), by chart key, only those that changed.
FIGURES: list[str] = [f"report-figure-{c.key}.data" for c in figures.CHARTS]
OUTPUTS = [_output(part) for part in PARTS] + [Output("report-figures", "data"),
                                               Output("report-shown", "data")]
# The caveat list names the view's cases: it changes with the view, and its digest costs
# more than sending it. (The table's rows are not sent here: table_rows.)
ALWAYS_SENT = ("report-caveat-list.children",)
DIGESTED = [part for part in PARTS if part not in ALWAYS_SENT] + FIGURES


@callback(OUTPUTS, [Input(f"report-filter-{f.wire}", "value") for f in FILTERABLE],
          State("report-id", "data"), State("report-history-marks", "data"),
          State("report-matrix-metric", "value"), State("report-shown", "data"),
          prevent_initial_call=True)
def refilter(*args: Any) -> list[Any]:
    """Redraw every chart, the matrix and the table for the chosen filters: the parts that
    differ from what the page shows (``shown``: their digests), and the new digests."""
    *values, report_id, marks, metric, drawn = args
    with session_scope() as session:
        page = report_page(report_cache(), session, report_id,
                           filters.filters_from_controls(values),
                           ReportChoices(matrix_metric=metric), ReportMarks.from_store(marks),
                           FACTS_KEPT)
    parts = view_parts(page)
    changed, digests = shown.changed_only([parts[n] for n in DIGESTED], drawn)
    sent = dict(zip(DIGESTED, changed, strict=True)) | {n: parts[n] for n in ALWAYS_SENT}
    figures_sent = {c.key: sent[f"report-figure-{c.key}.data"] for c in figures.CHARTS
                    if sent[f"report-figure-{c.key}.data"] is not dash.no_update}
    return [*(sent[n] for n in PARTS), figures_sent or dash.no_update, digests]


# A filter change draws at once the charts in the window; those within a window's height
# when the browser is idle; one further away when it comes near, or before the page is
# printed (static/lazy_parts.js): plotly took 35-55 ms a chart in this machine's headless
# Chromium, and most of the page's charts are out of sight.
clientside_callback(
    ClientsideFunction(namespace="moescope_lazy", function_name="draw_near"),
    [Output(f"report-graph-{c.key}", "figure") for c in figures.CHARTS],
    Input("report-figures", "data"),
    prevent_initial_call=True,
)


# A filter change redraws the matrix with everything else (refilter); this is the metric.
# The export link follows it, so the file opens on the matrix the page shows.
@callback(Output("report-matrix", "children", allow_duplicate=True),
          Output("report-export-link", "href", allow_duplicate=True),
          Input("report-matrix-metric", "value"),
          [State(f"report-filter-{f.wire}", "value") for f in FILTERABLE],
          State("report-id", "data"), prevent_initial_call=True)
def rematrix(metric: str, *args: Any) -> tuple[html.Div, str]:
    """The matrix for the chosen metric and filters, and the export link of that view."""
    *values, report_id = args
    chosen = filters.filters_from_controls(values)
    with session_scope() as session:
        matrix = report_matrix(session, int(report_id), chosen, metric)
    return (matrix_table.matrix_table(int(report_id), matrix),
            links.report_export_href(int(report_id), chosen, metric))


# The view's filters go into the address bar without a page reload, so a view can be
# shared; replaceState does not re-run the pages router.
clientside_callback(
    """function (search) {
        if (search !== window.location.search && (search || window.location.search)) {
            window.history.replaceState(null, '', window.location.pathname + search);
        }
        return search;
    }""",
    Output("report-search-applied", "data"), Input("report-search", "data"),
)


# The case table sits below the charts. Building it (ag-grid) took the first load 0.3 s and
# updating its rows a filter change 0.12 s in the browser, most often out of sight, and its
# rows were most of a 5,000-case filter change's answer (2.5 of 3.3 MB): it is built once
# the charts are drawn and the browser is idle, and asks for a filter's rows when it is
# near the window (static/lazy_parts.js).
clientside_callback(
    ClientsideFunction(namespace="moescope_lazy", function_name="table_wanted"),
    Output("report-table-wanted", "data"), Input("report-id", "data"),
)
FILTER_STATES = [State(f"report-filter-{f.wire}", "value") for f in FILTERABLE]


def _marked_rows(report_id: int, values: list[Any], stored: dict[str, Any] | None
                 ) -> list[dict[str, Any]]:
    """The rows of the view, each with its case's mark against its history (moved_cases)."""
    with session_scope() as session:
        rows = report_view.view_rows(report_cache(), session, int(report_id),
                                     filters.filters_from_controls(values))
    marks = ReportMarks.from_store(stored).marks
    return [{**row, **(marks[row["id"]].row() if row["id"] in marks else {})}
            for row in rows]


@callback(Output("report-table", "children"), Input("report-table-wanted", "data"),
          FILTER_STATES, State("report-id", "data"), State("report-history-marks", "data"),
          prevent_initial_call=True)
def mount_table(_wanted: bool, *args: Any) -> list[Any]:
    """The case table with the view's rows, and its CSV button."""
    *values, report_id, marks = args
    return [html.Div([html.Button("Download CSV of the rows in view", id="report-csv-button"),
                      dcc.Download(id="report-csv")], className="links"),
            case_grid(_marked_rows(report_id, values, marks))]


# A filter change (the view's query changes with it) asks for the table's rows at once
# when the table is in sight, else when it comes near.
clientside_callback(
    ClientsideFunction(namespace="moescope_lazy", function_name="rows_near"),
    Output("report-rows-wanted", "data"), Input("report-search", "data"),
    prevent_initial_call=True,
)


@callback(Output("report-grid", "rowData"), Input("report-rows-wanted", "data"),
          FILTER_STATES, State("report-id", "data"), State("report-history-marks", "data"),
          prevent_initial_call=True)
def table_rows(_wanted: Any, *args: Any) -> list[dict[str, Any]]:
    """The view's rows for the table."""
    *values, report_id, marks = args
    return _marked_rows(report_id, values, marks)


@callback(Output("report-csv", "data"), Input("report-csv-button", "n_clicks"),
          State("report-grid", "virtualRowData"), State("report-grid", "rowData"),
          FILTER_STATES, State("report-id", "data"), prevent_initial_call=True)
def download_csv(_clicks: int, in_view: list[dict[str, Any]] | None,
                 rows: list[dict[str, Any]] | None, *args: Any) -> dict[str, Any]:
    """The rows in view: the page filters, then the table's own filters and sort; the
    values exact, not as the grid rounds them. The table may still hold an earlier view
    (it takes a filter's rows when it comes near the window): then the view's rows."""
    *values, report_id = args
    shown = in_view if in_view is not None else rows or []
    view = _marked_rows(report_id, values, None)
    if {r.get("id") for r in rows or []} != {r.get("id") for r in view}:
        shown = view
    with session_scope() as session:
        chosen = report_view.csv_rows(report_cache(), session, int(report_id), shown)
    return {"content": case_table.csv_text(chosen),
            "filename": f"moescope-report-{int(report_id)}.csv", "type": "text/csv",
            "base64": False}
