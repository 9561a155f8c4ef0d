"""The summary per mode x precision x pipeline as the report page shows it (the rows are
app.services.summary's, which the export shows too)."""

from __future__ import annotations

from collections.abc import Sequence

from dash import html

from app.dashboard.components import table
from app.services.summary import SummaryRow, best_text

HEADER = ("mode", "precision", "pipeline", "cases", "best % of peak", "median % of peak",
          "best useful TFLOP/s per GPU", "median layer ms", "limiters")


def _number(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def summary_table(rows: Sequence[SummaryRow]) -> html.Table | html.Div:
    if not rows:
        return html.Div("no case in view", className="muted")
    return table(HEADER, [
        (r.mode, r.precision, r.pipeline, str(r.cases),
         best_text(r.best_percent_of_peak, r.best_tied),
         _number(r.median_percent_of_peak), best_text(r.best_useful_tf, r.best_tf_tied),
         _number(r.median_layer_ms, 3), r.limiter_text) for r in rows],
        id="report-summary-table")
