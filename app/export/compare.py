"""Two reports compared, as one HTML document: what the dashboard's compare page shows (its
read model, ``services.compare_page.ComparePage``)."""

from __future__ import annotations

from app.export.document import export_spec, render
from app.export.footer import Footer
from app.services import compare_text
from app.services.compare_page import ComparePage

RATIO_CHART = "chart-ratio"


def compare_html(page: ComparePage, footer: Footer) -> str:
    base, head = page.base, page.head
    return render(
        "compare.html.j2", {RATIO_CHART: export_spec(page.chart)},
        title=f"moescope: report {base.id} against {head.id}",
        base=base, head=head, summary=page.summary, headline=page.result.headline,
        series_line=page.series_line,
        groups=page.groups, provenance_columns=compare_text.PROVENANCE_COLUMNS,
        provenance=page.provenance, geomean_columns=compare_text.GEOMEAN_COLUMNS,
        geomeans=page.geomeans, columns=compare_text.CASE_COLUMNS, rows=page.cases,
        chart_id=RATIO_CHART, only_base=page.result.only_base,
        only_head=page.result.only_head, footer=footer,
    )
