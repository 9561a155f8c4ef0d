"""A report's "compare with…" links: the newest report of each other GPU, matched by
configuration on the compare page (DESIGN.md "Across hardware")."""

from __future__ import annotations

from dash import dcc, html

from app.dashboard import links
from app.services.platforms import short_gpu


def compare_with(report_id: int, others: list[tuple[str, int]]) -> html.Div:
    if not others:
        return html.Div(id="report-compare-with", hidden=True)
    return html.Div([
        html.Span("compare with… "),
        *[dcc.Link(f"{short_gpu(gpu)} #{other}", href=links.compare_href(report_id, other))
          for gpu, other in others],
        dcc.Link("all GPUs side by side",
                 href=f"/platforms?reports={int(report_id)},"
                      + ",".join(str(int(o)) for _, o in others)
                      + f"&baseline={int(report_id)}"),
    ], className="links", id="report-compare-with")
