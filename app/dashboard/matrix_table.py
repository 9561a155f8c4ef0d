"""The configuration matrix as the report page draws it: an HTML table, grouped by mode,
precision over pipeline in the header, the best cell of each row marked, a blank where a
combination was not run; each cell names its case on hover and opens it on click."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from dash import dcc, html

from app.dashboard import links
from app.matrix_metrics import DEFAULT_METRIC, METRICS
from app.services.matrix import Matrix, MatrixCell

METRIC_OPTIONS = [{"label": m.label, "value": m.key} for m in METRICS.values()]


def _cell(report_id: int, matrix: Matrix, cell: MatrixCell | None, best: bool,
          tied: bool) -> html.Td:
    if cell is None:
        return html.Td("", className="matrix-blank", title="not run")
    text = matrix.text(cell.value) or "n/a"
    classes = ["matrix-cell", *(["matrix-best"] if best else []),
               *(["matrix-tied"] if tied else []),
               *(["matrix-caveated"] if cell.caveats else [])]
    if isinstance(cell.value, str):
        classes.append(f"limiter-{cell.value}")
    mark = "\u2605 " if best else ("\u2248 " if tied else "")
    parts: list[Any] = [dcc.Link(mark + text, href=links.case_href(report_id, cell.case_id))]
    if cell.count > 1:
        # Run more than once here: each case linked, none dropped.
        parts += [html.Span(f" \u00d7{cell.count}", className="matrix-count"), " ",
                  *(dcc.Link(f"#{i}", href=links.case_href(report_id, case_id),
                             className="matrix-other", title=case_id)
                    for i, case_id in enumerate(cell.case_ids, 1))]
    return html.Td(parts, className=" ".join(classes), title=cell.hover)


def matrix_table(report_id: int, matrix: Matrix) -> html.Div:
    if not matrix.rows:
        return html.Div("no case in view", className="muted")
    head = html.Thead([
        html.Tr([html.Th("configuration", rowSpan=2),
                 *(html.Th(p, colSpan=n, className="matrix-precision")
                   for p, n in matrix.precision_spans())]),
        html.Tr([html.Th(pipeline) for _, pipeline in matrix.columns]),
    ])
    body: list[Any] = []
    for mode, rows in groupby(matrix.rows, key=lambda r: r.configuration.mode):
        body.append(html.Tr(html.Th(mode, colSpan=1 + len(matrix.columns),
                                    className="matrix-mode")))
        for row in rows:
            body.append(html.Tr([
                html.Th(row.label, className="matrix-config"),
                *(_cell(report_id, matrix, cell, i == row.best,
                        i != row.best and i in row.ties)
                  for i, cell in enumerate(row.cells)),
            ]))
    best = ("" if matrix.metric.better is None else
            f"; \u2605 the row's best ({matrix.metric.better} is better), \u2248 tied with "
            f"it within noise (the windows' spread)")
    return html.Div([
        html.Table([head, html.Tbody(body)], className="grid-table matrix-table",
                   id="report-matrix-table"),
        html.Div(f"{matrix.metric.label} per case{best}; blank: not run; hover for the case "
                 "id, click to open it", className="muted"),
    ])


def matrix_section(table: html.Div, metric: str = DEFAULT_METRIC) -> html.Section:
    """``table``: the matrix_table of the view; ``metric``: the one it shows."""
    return html.Section([
        html.Div([
            html.H2("Configuration matrix"),
            dcc.Dropdown(id="report-matrix-metric", options=METRIC_OPTIONS,
                         value=metric, clearable=False, searchable=False,
                         className="matrix-metric"),
        ], className="matrix-head"),
        html.Div(table, id="report-matrix"),
    ], id="report-matrix-section", className="matrix-section")
