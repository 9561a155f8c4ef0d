"""/reports/<id> — one report: header, filters (kept in the URL), the configuration matrix,
eleven charts each with the notes and caveats that qualify it, the notes panel, the case
table, CSV."""

from __future__ import annotations

from typing import Any

import dash
import dash_ag_grid as dag
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
from app.case_fields import FILTERABLE, TABLED, CaseField, CaseFilter
from app.core.db import session_scope
from app.core.errors import NotFound
from app.dashboard import (
    caveat_list,
    filter_options,
    filters,
    links,
    matrix_table,
    moved_cases,
    provenance,
    report_cache,
    shown,
    summary_table,
)
from app.dashboard.alert_links import alert_links
from app.dashboard.components import (
    GRAPH_CONFIG,
    caveat_badges,
    not_found,
    note_block,
    parse_report_id,
    style_legend,
    table,
)
from app.services import alerts, case_table, chart_panels, comparison, history_view, report_view
from app.services.explain import attributions
from app.services.matrix import build_matrix, report_matrix
from ingest.derived import report_notes

dash.register_page(__name__, path_template="/reports/<report_id>",
                   title="moescope: report", name="Report", order=2)  # type: ignore[no-untyped-call]

def header(h: report_view.ReportHeader, export_href: str) -> html.Div:
    shape = ", ".join(f"{k}={v}" for k, v in h.shape.items()
                      if k in ("T", "D", "E", "K", "defaultF"))
    return html.Div([
        html.H1(h.gpu, id="report-gpu"),
        html.Div([
            html.Span(["date ", html.B(h.date)]), html.Span(["shape ", html.B(shape)]),
            html.Span(["cases ", html.B(str(h.case_count))]),
            *([html.Span(["run ", html.B(h.run_id)], id="report-run-id")] if h.run_id else []),
            html.Span(["source ", html.B(h.source)], id="report-source"),
        ], className="facts"),
        html.Details([html.Summary("Theoretical peaks"),
                      table(["peak", "value"], h.peaks, id="report-peaks")], open=True),
        html.Div([html.A("report.json", href=links.report_json_href(h.id),
                         id="report-json-link"),
                  html.A("cases as JSON (API)", href=f"/api/v1/reports/{h.id}/cases"),
                  # The filters in view go along; the file is a download, not a page.
                  html.A("Export HTML", href=export_href, id="report-export-link")],
                 className="links"),
    ], className="report-header")


def filter_controls(options: dict[str, list[dict[str, Any]]], chosen: CaseFilter) -> html.Div:
    """A dropdown per filterable field; each option with its count under the other
    filters, disabled at 0 (filter_options)."""
    controls = []
    for name in (f.wire for f in FILTERABLE):
        controls.append(html.Label([
            html.Span(name),
            dcc.Dropdown(
                id=f"report-filter-{name}", options=options.get(name, []),
                value=[str(v) for v in getattr(chosen, name)], multi=True,
                placeholder="all",
            ),
        ], className="filter"))
    return html.Div(controls, className="filters", id="report-filters")


def drawn_text(panel: chart_panels.ChartPanel) -> str:
    return (f"{panel.case_count} case(s) in view" if panel.charted == panel.case_count
            else f"{panel.charted} of {panel.case_count} cases in view charted")


def chart_notes(panel: chart_panels.ChartPanel) -> list[Any]:
    return ([note_block(n) for n in panel.notes]
            or [html.Div("no report note qualifies this chart", className="muted")])


def chart_aside(key: str, parts: dict[str, Any]) -> list[Any]:
    """The chart's cases drawn, its notes and its caveats: three parts that a filter
    changes apart (the notes seldom), each sent only when it changes (``shown``)."""
    return [
        html.Div(parts[f"report-aside-{key}-drawn.children"], id=f"report-aside-{key}-drawn",
                 className="muted"),
        html.H4("Qualifying notes"),
        html.Div(parts[f"report-aside-{key}-notes.children"], id=f"report-aside-{key}-notes"),
        html.H4("Caveats in view"),
        html.Div(parts[f"report-aside-{key}-caveats.children"],
                 id=f"report-aside-{key}-caveats"),
    ]


def chart_rows(panels: list[chart_panels.ChartPanel], parts: dict[str, Any]) -> list[Any]:
    """Every chart (a chart with nothing to show hidden, so a filter can bring it back),
    then one line per chart left out and why."""
    return [*(html.Section([
        html.Div(dcc.Graph(id=f"report-graph-{p.key}",
                           figure=parts[f"report-figure-{p.key}.data"], config=GRAPH_CONFIG),
                 className="chart"),
        html.Aside(chart_aside(p.key, parts), id=f"report-aside-{p.key}",
                   className="chart-aside"),
    ], className="chart-row", id=f"report-chart-{p.key}",
        hidden=parts[f"report-chart-{p.key}.hidden"])
        for p in panels),
        html.Div(parts["report-absent-charts.children"], id="report-absent-charts",
                 className="muted")]


def absent_lines(panels: list[chart_panels.ChartPanel]) -> list[html.P]:
    return [html.P(f"{p.title} not drawn: {p.absent}.") for p in panels if p.absent]


# What an engineer reads first, left to right, visible at 1440 px without scrolling: the
# configuration, the variant, the time, the throughput, how far from peak, what bounds it.
FIRST_COLUMNS = ("id", "mode", "ep", "precision", "pipeline", "category", "F", "imbalance",
                 "layerMS", "usefulTFPerGPU", "percentOfPeak", "limiter")
_NARROW = {"ep": 64, "F": 72, "imbalance": 84, "mode": 92, "pipeline": 92, "precision": 90,
           "category": 118, "limiter": 88, "layerMS": 88, "percentOfPeak": 92}


def _column_def(field: CaseField) -> dict[str, Any]:
    cell: dict[str, Any] = {}
    if field.wire == "id":
        # Wrapped, not cut: ids differ at their end (F3072-i1, -i4).
        cell = {"cellRenderer": "CaseLink", "pinned": "left", "width": 290, "minWidth": 200,
                "wrapText": True, "autoHeight": True,
                "cellStyle": {"wordBreak": "break-all", "lineHeight": "18px",
                              "paddingTop": "4px", "paddingBottom": "4px"}}
    elif field.kind in (int, float):
        cell = {"filter": "agNumberColumnFilter",
                "valueFormatter": {"function": "caseNumber(params.value)"}}  # see static/
    if field.wire in _NARROW:
        cell.update(width=_NARROW[field.wire], minWidth=60)
    return {"field": field.wire, "headerName": field.label, **cell}


def _ordered(fields: tuple[CaseField, ...]) -> list[CaseField]:
    first = [f for name in FIRST_COLUMNS for f in fields if f.wire == name]
    return first + [f for f in fields if f.wire not in FIRST_COLUMNS]


COLUMN_DEFS: list[dict[str, Any]] = [
    *(_column_def(f) for f in _ordered(TABLED)),
    {"field": "caveats", "headerName": "caveats", "cellRenderer": "CaveatBadges", "minWidth": 240},
]
FIRST_SHOWN = len(FIRST_COLUMNS)  # the history column goes after them


TABLE_HEIGHT = "560px"


def case_grid(rows: list[dict[str, Any]]) -> dag.AgGrid:
    """The view's ``rows`` (``mount_table``); a filter's come later (``table_rows``)."""
    return dag.AgGrid(
        id="report-grid", rowData=rows,
        columnDefs=[*COLUMN_DEFS[:FIRST_SHOWN], moved_cases.TREND_COLUMN,
                    *COLUMN_DEFS[FIRST_SHOWN:]],
        defaultColDef={"sortable": True, "filter": True, "resizable": True, "minWidth": 90,
                       "wrapHeaderText": True, "autoHeaderHeight": True},
        dashGridOptions={"pagination": True, "paginationPageSize": 50,
                         "animateRows": False},
        # Rows known by their case id: a filter change updates the rows that stay in view
        # instead of building every row (and measuring its wrapped id) anew.
        getRowId="params.data.id",
        style={"height": TABLE_HEIGHT}, className="ag-theme-alpine",
    )


def layout(report_id: str | None = None, **query: Any) -> html.Div:
    rid = parse_report_id(report_id)
    with session_scope() as session:
        try:
            if rid is None:
                raise NotFound(f"report {report_id} does not exist")
            marks = history_view.report_marks(session, rid)
            moved_cases.add_why(marks.marks, attributions(session, marks.verdicts))
            data = report_cache().report(session, rid)
            problems = filter_options.url_problems(query, data.facets)
            chosen = filter_options.known_filters(filters.filters_from_query(query),
                                                  data.facets)
            view = report_view.report_view(report_cache(), session, rid, chosen,
                                           history_view.hover_marks(marks.marks))
            previous = comparison.previous_report(session, rid)
            report_alerts = alerts.alerts_of(session, report_ids=[rid])
        except NotFound as exc:
            return not_found(exc.detail)
    hint = filter_options.empty_hint(data.cases, chosen)
    choices = filter_options.all_options(data.facets, data.cases, chosen)
    metric, metric_problem = matrix_table.metric_from_query(query.get("matrixMetric"))
    problems += [metric_problem] if metric_problem else []
    parts = view_parts(rid, view, marks.marks, metric, hint, choices)
    parts["report-url-problems.hidden"] = not problems
    return html.Div([
        dcc.Store(id="report-id", data=rid),
        dcc.Store(id="report-history-marks", data=marks.marks),
        dcc.Store(id="report-search", data=parts["report-search.data"]),
        dcc.Store(id="report-search-applied"),
        dcc.Store(id="report-shown", data=shown.digests([parts[n] for n in DIGESTED])),
        # A filter change's figures (those that changed, by chart) go here first;
        # static/lazy_parts.js draws each when its chart is in or near the window.
        dcc.Store(id="report-figures"),
        header(view.header, parts["report-export-link.href"]),
        provenance.provenance_line(view.meta, rid, previous),
        alert_links(report_alerts, "report-alerts"),
        html.Div([html.P(p) for p in problems], id="report-url-problems",
                 className="url-problems", hidden=not problems),
        filter_controls(choices, chosen),
        html.Div(parts["report-count.children"], id="report-count", className="count"),
        html.Div(parts["report-empty.children"], id="report-empty", className="empty-hint",
                 hidden=parts["report-empty.hidden"]),
        html.Div(parts["report-cap-banner.children"], id="report-cap-banner",
                 className="cap-banner", hidden=parts["report-cap-banner.hidden"]),
        matrix_table.matrix_section(parts["report-matrix.children"], metric),
        html.Details([html.Summary("Summary per mode x precision x pipeline"),
                      html.Div(parts["report-summary.children"], id="report-summary")],
                     open=True, className="summary-section"),
        moved_cases.moved_cases_section(marks, view.cases),
        html.Div(parts["report-legend.children"], id="report-legend",
                 className="style-legend"),
        # An empty view draws no empty axes: the hint above says what to relax.
        html.Div(chart_rows(view.panels, parts), id="report-charts",
                 hidden=parts["report-charts.hidden"]),
        html.Section([html.H2("Report notes"),
                      *[note_block(n) for n in report_notes(view.meta)]],
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


def view_parts(report_id: int, view: report_view.ReportView, marks: dict[str, Any],
               metric: str, hint: str, choices: dict[str, list[dict[str, Any]]]
               ) -> dict[str, Any]:
    """Every part of the page that the filters change, by output (``id.property``): what
    the page is drawn with, and what the filter callback sends."""
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
        "report-matrix.children": matrix_table.matrix_table(
            report_id, build_matrix(view.cases, metric)),
        "report-count.children": view.count_text,
        "report-cap-banner.children": view.banner, "report-cap-banner.hidden": not view.banner,
        "report-search.data": filters.search_from_filters(view.filters),
        "report-legend.children": style_legend(view.charted),
        "report-export-link.href": links.report_export_href(report_id, view.filters, metric),
        "report-moved-list.children": moved_cases.moved_list(marks, view.cases),
        "report-empty.children": hint, "report-empty.hidden": not hint,
        "report-charts.hidden": bool(hint),
        "report-summary.children": summary_table.summary_table(view.cases),
        "report-caveat-list.children": caveat_list.caveat_list(report_id, view.cases),
        "report-absent-charts.children": absent_lines(view.panels),
        # A filter chosen in the page replaces the URL's: its problems no longer apply.
        "report-url-problems.hidden": True,
        **{f"report-filter-{f.wire}.options": choices[f.wire] for f in FILTERABLE},
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
    chosen = filters.filters_from_controls(values)
    with session_scope() as session:
        view = report_view.report_view(report_cache(), session, report_id, chosen,
                                       history_view.hover_marks(marks or {}))
    hint = filter_options.empty_hint(view.every_case, chosen)
    choices = filter_options.all_options(view.facets, view.every_case, chosen)
    parts = view_parts(report_id, view, marks or {}, metric, hint, choices)
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


def _marked_rows(report_id: int, values: list[Any], marks: dict[str, Any] | None
                 ) -> list[dict[str, Any]]:
    """The rows of the view, each with its case's mark against its history (moved_cases)."""
    with session_scope() as session:
        rows = report_view.view_rows(report_cache(), session, int(report_id),
                                     filters.filters_from_controls(values))
    return [{**row, **(marks or {}).get(row["id"], {})} for row in rows]


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
