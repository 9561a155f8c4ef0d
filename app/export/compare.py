"""Two reports compared, as one HTML document: what the dashboard's compare page shows (its
text cells from ``services.compare_text``, its chart from ``figures.compare_charts``)."""

from __future__ import annotations

from app.export.document import export_spec, render
from app.export.footer import Footer
from app.figures import compare_charts
from app.services import compare_text
from app.services.comparison import Comparison, ratio_points
from app.services.report_view import ReportHeader

RATIO_CHART = "chart-ratio"


def compare_html(base: ReportHeader, head: ReportHeader, result: Comparison,
                 footer: Footer) -> str:
    chart = compare_charts.ratio_spec(ratio_points(result), result.settings.threshold_percent,
                                      base.id, head.id)
    return render(
        "compare.html.j2", {RATIO_CHART: export_spec(chart)},
        title=f"moescope: report {base.id} against {head.id}",
        base=base, head=head, summary=result.summary_text(), headline=result.headline,
        series_line=compare_text.series_line(result),
        groups=compare_text.group_lines(result),
        provenance_columns=compare_text.PROVENANCE_COLUMNS,
        provenance=compare_text.provenance_rows(result),
        geomean_columns=compare_text.GEOMEAN_COLUMNS,
        geomeans=compare_text.geomean_rows(result),
        columns=compare_text.CASE_COLUMNS,
        rows=[compare_text.case_cells(row) for row in result.rows],
        chart_id=RATIO_CHART, only_base=result.only_base, only_head=result.only_head,
        footer=footer,
    )
