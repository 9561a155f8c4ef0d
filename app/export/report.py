"""One report's export: what the dashboard's report page shows for a set of filters (its
view, charts, notes, caveat counts and case table), as one HTML document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.dashboard.case_table import TABLE_COLUMNS, table_row
from app.dashboard.case_view import display_value
from app.dashboard.charts import caveat_counts
from app.dashboard.filters import FILTER_FIELDS
from app.dashboard.report_view import ReportView
from app.export.document import export_spec, render
from app.export.footer import Footer
from app.export.summary import summary_rows
from app.figures import Case
from app.repository.cases import CaseFilter
from ingest.derived import report_notes

_TEXT_COLUMNS = {"id", "mode", "precision", "pipeline", "category", "caveats"}


@dataclass(frozen=True)
class Cell:
    text: str
    numeric: bool


def _cells(case: Case) -> list[Cell]:
    row = table_row(case)
    return [Cell("" if row.get(name) is None else display_value(row[name]),
                 name not in _TEXT_COLUMNS)
            for name, _ in TABLE_COLUMNS if name != "caveats"]


def filters_text(filters: CaseFilter) -> str:
    """The filters of the view, as the page's URL spells them ('' when none)."""
    return ", ".join(
        f"{name} = {' or '.join(display_value(v) for v in getattr(filters, name))}"
        for name, _ in FILTER_FIELDS if getattr(filters, name))


def chart_id(key: str) -> str:
    return f"chart-{key}"


def report_html(view: ReportView, footer: Footer) -> str:
    header = view.header
    charts = {chart_id(p.key): export_spec(p.figure) for p in view.panels}
    return render(
        "report.html.j2", charts,
        title=f"moescope report {header.id}: {header.gpu} {header.date}",
        header=header, view=view, filters=filters_text(view.filters),
        notes=report_notes(view.meta), caveats=caveat_counts(view.cases),
        summary=summary_rows(view.cases), panels=view.panels, chart_id=chart_id,
        columns=[label for name, label in TABLE_COLUMNS if name != "caveats"],
        rows=[(_cells(case), [c["code"] for c in case.get("caveats", [])])
              for case in view.cases],
        footer=footer, fmt=_fmt,
    )


def _fmt(value: Any, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"
