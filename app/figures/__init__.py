"""Plotly figure builders: pure functions from plain report data to ``go.Figure``.

Input is what the API gives: case dicts as ``case_out`` returns them (wire fields plus the
derived ones) and the report's ``meta`` dict. Nothing here touches a database or Dash, so
the dashboard and a static HTML export build the very same figures.

Each chart is first a *spec*, the figure as plain plotly data, then a ``go.Figure`` wrapped
around it unvalidated: plotly's validation and its deep copies cost several times the
building itself, which a filter callback redrawing eleven charts cannot afford. The
dashboard hands specs straight to ``dcc.Graph``; the tests validate every figure.

The modules: ``style`` (colours, markers, escaping), ``layout`` (the frame of a chart),
``traces`` (per-case traces), ``configuration`` (where a case sits on their axis),
``point_key`` (the numbers on scatter points, and their key),
``report_charts``, ``panel_charts`` and ``roofline`` (the report charts), ``charts``
(them listed with their notes), ``case_charts`` (one case),
``history_charts`` (one case across reports).
"""

from app.figures.case_charts import case_memory_spec, case_specs
from app.figures.charts import CHARTS, Chart
from app.figures.history_charts import history_specs, verdict_text
from app.figures.layout import to_figure
from app.figures.panel_charts import matching_series, memory_spec, scaling_spec
from app.figures.report_charts import phases_spec
from app.figures.style import (
    Meta,
    Spec,
    marker_symbol,
    pipeline_pattern,
    pipeline_symbol,
    precision_colour,
    precision_symbol,
    text,
)

__all__ = [
    "CHARTS", "Chart", "Meta", "Spec", "case_memory_spec",
    "case_specs", "history_specs", "matching_series", "memory_spec", "phases_spec",
    "marker_symbol", "pipeline_pattern", "pipeline_symbol", "precision_colour",
    "precision_symbol", "scaling_spec",
    "text", "to_figure", "verdict_text",
]
