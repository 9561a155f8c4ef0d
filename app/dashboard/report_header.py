"""The report page's top: its header (GPU, date, shape, peaks, links), its host and
software line with the link to compare with the previous report, and its filters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dash import dcc, html

from app.case_fields import FILTERABLE, CaseFilter
from app.dashboard import links
from app.dashboard.components import table
from app.services.filter_choices import FilterOption
from app.services.host_facts import NO_HOST
from app.services.report_view import ReportHeader

SHAPE_KEYS = ("T", "D", "E", "K", "defaultF")


def header(h: ReportHeader, export_href: str) -> html.Div:
    shape = ", ".join(f"{k}={v}" for k, v in h.shape.items() if k in SHAPE_KEYS)
    return html.Div([
        html.H1(h.gpu, id="report-gpu"),
        html.Div([
            html.Span(["date ", html.B(h.date)]), html.Span(["shape ", html.B(shape)]),
            html.Span(["cases ", html.B(str(h.case_count))]),
            *([html.Span(["run ", html.B(h.run_id)], id="report-run-id")] if h.run_id else []),
            html.Span(["source ", html.B(h.source)], id="report-source"),
        ], className="facts"),
        html.Details([html.Summary("Theoretical peaks"),
                      table(["peak", "value"], h.peaks, id="report-peaks")], open=True),
        html.Div([html.A("report.json", href=links.report_json_href(h.id),
                         id="report-json-link"),
                  html.A("cases as JSON (API)", href=f"/api/v1/reports/{h.id}/cases"),
                  # The filters in view go along; the file is a download, not a page.
                  html.A("Export HTML", href=export_href, id="report-export-link")],
                 className="links"),
    ], className="report-header")


def provenance_line(host: tuple[tuple[str, str], ...], report_id: int,
                    previous: int | None) -> html.Div:
    shown: list[Any] = ([html.Span([f"{label} ", html.B(value)]) for label, value in host]
                        or [html.Span(NO_HOST, className="muted")])
    compare = (dcc.Link(f"compare with previous #{previous}",
                        href=links.compare_href(previous, report_id),
                        id="report-compare-previous")
               if previous is not None else
               html.Span("first report of its series (GPU and shape)", className="muted",
                         id="report-compare-previous"))
    return html.Div([*shown, html.Span(compare)], className="facts", id="report-provenance")


def filter_controls(options: Mapping[str, list[FilterOption]], chosen: CaseFilter
                    ) -> html.Div:
    """A dropdown per filterable field; each option with its count under the other
    filters, disabled at 0 (services.filter_choices)."""
    return html.Div([html.Label([
        html.Span(f.wire),
        dcc.Dropdown(id=f"report-filter-{f.wire}", options=options.get(f.wire, []),
                     value=[str(v) for v in getattr(chosen, f.wire)], multi=True,
                     placeholder="all"),
    ], className="filter") for f in FILTERABLE], className="filters", id="report-filters")
