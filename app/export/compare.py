"""Two reports compared, as one HTML document: what the dashboard's compare page shows."""

from __future__ import annotations

from app.dashboard.report_view import ReportData
from app.export.document import render
from app.export.footer import Footer
from app.services import comparison


def compare_html(base: ReportData, head: ReportData, footer: Footer) -> str:
    result = comparison.compare(base.cases, head.cases)
    rows = [(row["id"], [(comparison.change_text(row["changes"][name]),
                          row["changes"][name].verdict) for name, _, _ in comparison.COMPARED])
            for row in comparison.ranked(result.rows)]
    return render(
        "compare.html.j2", {},
        title=f"moescope: report {base.header.id} against {head.header.id}",
        base=base.header, head=head.header, summary=comparison.summary_text(result),
        columns=["case", *[label for _, label, _ in comparison.COMPARED]], rows=rows,
        only_base=result.only_base, only_head=result.only_head, footer=footer,
    )
