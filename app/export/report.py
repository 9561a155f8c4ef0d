"""One report's export: what the dashboard's report page shows for a set of filters (its
read model, ``services.report_page.ReportPage``), as one HTML document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.case_fields import TABLED, CaseFilter
from app.case_view import CaseView
from app.export.document import export_spec, render
from app.export.footer import Footer
from app.services.case_table import table_row
from app.services.case_text import display_value, table_number
from app.services.host_facts import NO_HOST
from app.services.report_page import ReportPage
from app.services.summary import best_text
from ingest.derived import CAVEAT_MEANINGS


@dataclass(frozen=True)
class Cell:
    text: str
    numeric: bool
    title: str = ""  # the limiter's cell: what bounds the case, in words


def _cells(case: CaseView, bound: tuple[str, str]) -> list[Cell]:
    """``bound``: what bounds the case, the sentence (the limiter cell's title) and its
    short form, which the cell prints after the limiter (paper shows no title)."""
    row = table_row(case)
    sentence, short = bound
    return [Cell(_limiter_text(row.get(f.wire), short) if f.wire == "limiter"
                 else _text(row.get(f.wire)), f.kind in (int, float),
                 sentence if f.wire == "limiter" else "") for f in TABLED]


def _limiter_text(limiter: Any, short: str) -> str:
    # The short form names the roof itself, except for latency's nearest roof.
    return short or _text(limiter)


def _text(value: Any) -> str:
    """A table cell as the page's grid shows it (numbers to 4 significant digits)."""
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return table_number(value)
    return display_value(value)


def filters_text(filters: CaseFilter) -> str:
    """The filters of the view, as the page's URL spells them ('' when none)."""
    return ", ".join(
        f"{f.wire} = {' or '.join(display_value(v) for v in values)}"
        for f, values in filters.active())


def chart_id(key: str) -> str:
    return f"chart-{key}"


def report_html(page: ReportPage, footer: Footer) -> str:
    """The file holds the matrix of every metric and a control to pick another, as the
    page's (the export is offline: no server to ask); it opens on the page's."""
    view = page.view
    header = view.header
    # A chart with nothing to show is left out, one line saying why (as on the page).
    charts = {chart_id(p.key): export_spec(p.figure) for p in view.panels if not p.absent}
    bounds = page.bounds
    return render(
        "report.html.j2", charts,
        title=f"moescope report {header.id}: {header.gpu} {header.date}",
        header=header, view=view, filters=filters_text(view.filters), host=page.facts.host,
        alerts=[a.opened.why for a in page.facts.alerts],
        no_host=NO_HOST, previous=page.facts.previous,
        notes=page.notes, caveats=view.caveats,
        summary=page.summary, panels=view.panels, chart_id=chart_id,
        matrices=page.matrices(), matrix_metric=page.metric, meanings=CAVEAT_MEANINGS,
        columns=[(f.wire, f.label) for f in TABLED],
        rows=[(_cells(case, bounds[case.id]), [c.code for c in case.caveats])
              for case in view.cases],
        history=page.history if page.history.judged_in_view else None,
        footer=footer, fmt=_fmt, best_text=best_text,
    )


def _fmt(value: Any, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"
