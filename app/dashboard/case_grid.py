"""The report page's case table (ag-grid): its columns and the grid. What an engineer reads
first, visible at 1440 px without scrolling: the case, its configuration in one column, the
time, the throughput, how far from peak, what bounds it, and how it moved against history."""

from __future__ import annotations

from typing import Any

import dash_ag_grid as dag

from app.case_fields import TABLED, CaseField
from app.dashboard.moved_cases import TREND_COLUMN

# One column of these, in this order (static/'s ``configuration``: training · EP32 · mxfp8
# · staged · F3072 · i4); each keeps its own column, hidden, for the grid's filter and sort.
CONFIGURATION = ("mode", "ep", "precision", "pipeline", "F", "imbalance")
FIRST_COLUMNS = ("id", "configuration", "layerMS", "usefulTFPerGPU", "percentOfPeak",
                 "limiter", "historyChange", "communicationSharePercent", "category")
TABLE_HEIGHT = "560px"
# A header wraps between words, never inside one (static/style.css): each column is at
# least as wide as its longest word at the header's font, plus the cell's padding and the
# menu icon.
_CHAR_PX, _PAD_PX, _MIN_PX = 8.5, 58, 72


def header_width(label: str) -> int:
    return max(_MIN_PX, round(max(len(w) for w in label.split()) * _CHAR_PX + _PAD_PX))


def _column_def(field: CaseField) -> dict[str, Any]:
    cell: dict[str, Any] = {"minWidth": header_width(field.label)}
    if field.wire == "id":
        # Wrapped, not cut: ids differ at their end (F3072-i1, -i4).
        cell = {"cellRenderer": "CaseLink", "pinned": "left", "width": 230, "minWidth": 160,
                "wrapText": True, "autoHeight": True,
                "cellStyle": {"wordBreak": "break-all", "lineHeight": "18px",
                              "paddingTop": "4px", "paddingBottom": "4px"}}
    elif field.kind in (int, float):
        cell.update(filter="agNumberColumnFilter",
                    valueFormatter={"function": "caseNumber(params.value)"})  # see static/
    if field.wire in CONFIGURATION:
        cell["hide"] = True
    cell.setdefault("width", max(cell["minWidth"], 96))
    return {"field": field.wire, "headerName": field.label, **cell}


CONFIGURATION_COLUMN: dict[str, Any] = {
    "colId": "configuration", "headerName": "configuration",
    "valueGetter": {"function": "configuration(params.data)"},
    "width": 250, "minWidth": 180, "wrapText": True, "autoHeight": True,
    "cellStyle": {"lineHeight": "18px", "paddingTop": "4px", "paddingBottom": "4px"},
}


def _key(column: dict[str, Any]) -> str:
    return str(column.get("field") or column.get("colId"))


def column_defs() -> list[dict[str, Any]]:
    every = [*(_column_def(f) for f in TABLED), CONFIGURATION_COLUMN, TREND_COLUMN,
             {"field": "caveats", "headerName": "caveats", "cellRenderer": "CaveatBadges",
              "minWidth": 200, "width": 240}]
    first = [c for name in FIRST_COLUMNS for c in every if _key(c) == name]
    return first + [c for c in every if _key(c) not in FIRST_COLUMNS]


COLUMN_DEFS = column_defs()


def case_grid(rows: list[dict[str, Any]]) -> dag.AgGrid:
    """The view's ``rows`` (``mount_table``); a filter's come later (``table_rows``)."""
    return dag.AgGrid(
        id="report-grid", rowData=rows, columnDefs=COLUMN_DEFS,
        defaultColDef={"sortable": True, "filter": True, "resizable": True,
                       "wrapHeaderText": True, "autoHeaderHeight": True},
        dashGridOptions={"pagination": True, "paginationPageSize": 50,
                         "animateRows": False},
        # Rows known by their case id: a filter change updates the rows that stay in view
        # instead of building every row (and measuring its wrapped id) anew.
        getRowId="params.data.id",
        style={"height": TABLE_HEIGHT}, className="ag-theme-alpine",
    )
