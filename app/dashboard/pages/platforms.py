"""/platforms?reports=1,9&baseline=9&mode=&precision= — reports of different GPUs side by
side, matched by configuration (issue 25): renders ``services.platforms.PlatformsPage``, its
texts from ``services.platforms_text``, its charts from ``figures.platform_charts`` (the
export renders the same three)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import dash
from dash import ClientsideFunction, Input, Output, callback, clientside_callback, dcc, html

from app.core.db import session_scope
from app.core.errors import NotFound
from app.dashboard.components import GRAPH_CONFIG, parse_report_id, table
from app.figures import platform_charts
from app.services import platforms_text as texts
from app.services import report_list
from app.services.platforms import PlatformsPage, platforms_page

dash.register_page(__name__, path="/platforms", title="moescope: platforms", name="Platforms",
                   order=4)  # type: ignore[no-untyped-call]

def query(ids: list[int] | None, baseline: int | None, modes: list[str],
          precisions: list[str]) -> str:
    pairs: list[tuple[str, Any]] = []
    if ids:
        pairs.append(("reports", ",".join(str(int(i)) for i in ids)))
    if baseline is not None:
        pairs.append(("baseline", int(baseline)))
    pairs += [("mode", m) for m in modes] + [("precision", p) for p in precisions]
    return "?" + urlencode(pairs, safe=",") if pairs else ""


def matrix(page: PlatformsPage) -> list[Any]:
    """The winner matrix's and the detail table's texts in a store, built into their
    holders by static/platforms_matrix.js: as Dash components their 600-odd cells took
    React longer than plotly took to draw every chart, and held the charts back."""
    platforms, variants = texts.winner_head(page)
    data = {
        "winners": {"platforms": platforms, "variants": variants,
                    "rows": texts.winner_rows(page)},
        "head": [*texts.MATRIX_HEAD, *[p.name for p in page.platforms]],
        "rows": [[texts.row_label(row), f"{row.precision} · {row.pipeline}",
                  [[texts.cell_class(c), "\n".join(texts.cell_lines(c))] for c in row.cells]]
                 for row in page.rows],
    }
    return [dcc.Store(id="platforms-matrix-data", data=data)]


def charts(page: PlatformsPage) -> list[Any]:
    names = [p.name for p in page.platforms]
    graphs: list[Any] = [
        dcc.Graph(id=f"platforms-bars-{i}", config=GRAPH_CONFIG,
                  figure=platform_charts.best_bars_spec(bars, names))
        for i, bars in enumerate(page.bars)]
    graphs.append(dcc.Graph(id="platforms-scatter", config=GRAPH_CONFIG,
                            figure=platform_charts.peak_scatter_spec(page.scatter, names)))
    return graphs


def view(page: PlatformsPage, export_href: str) -> html.Div:
    base = page.platforms[page.baseline]
    return html.Div([
        html.P(page.headline, id="platforms-headline", className="cap-banner"),
        table(texts.PLATFORM_HEAD, texts.platform_cells(page), id="platforms-list"),
        html.Div(html.A("Export HTML", href=export_href, id="platforms-export-link"),
                 className="links"),
        html.H2(f"Geometric mean of useful TF/GPU ratios to {base.name}"),
        table([*texts.GEOMEAN_HEAD, *[p.name for p in page.platforms]],
              texts.geomean_cells(page), id="platforms-geomeans"),
        html.H2("Best useful TF/GPU per configuration"),
        *charts(page),
        *matrix(page),
        html.H2("Winner per configuration: useful TF/GPU over every platform, precision "
                "and pipeline (best: fastest; ≈: tied with it within noise; ratio to "
                f"{base.name} in the same precision · pipeline)"),
        html.Div(id="platforms-matrix-holder", className="table-scroll"),
        html.H2("Per configuration and precision · pipeline"),
        html.Div(id="platforms-detail-holder", className="table-scroll"),
    ])


def result(ids: list[int] | None, baseline: int | None, modes: list[str],
           precisions: list[str]) -> tuple[html.Div, PlatformsPage | None]:
    try:
        with session_scope() as session:
            page = platforms_page(session, ids, baseline, modes=modes, precisions=precisions)
    except NotFound as exc:
        return html.Div(exc.detail, className="muted", id="platforms-empty"), None
    except ValueError:
        return html.Div("The baseline must be one of the picked reports.", className="muted",
                        id="platforms-empty"), None
    href = "/api/v1/platforms/export.html" + query(
        [p.report_id for p in page.platforms], baseline, modes, precisions)
    return view(page, href), page


def _baseline_options(page: PlatformsPage | None) -> list[dict[str, Any]]:
    return [{"label": p.name, "value": p.report_id} for p in page.platforms] if page else []


def _ids(raw: str | None) -> list[int] | None:
    if not raw:
        return None
    ids = [parse_report_id(part) for part in raw.split(",")]
    return [i for i in ids if i is not None] or None


def layout(reports: str | None = None, baseline: str | None = None,
           mode: str | list[str] | None = None, precision: str | list[str] | None = None,
           **_: Any) -> html.Div:
    modes = [mode] if isinstance(mode, str) else list(mode or [])
    precisions = [precision] if isinstance(precision, str) else list(precision or [])
    base = parse_report_id(baseline) if baseline else None
    shown, page = result(_ids(reports), base, modes, precisions)
    with session_scope() as session:
        options = report_list.report_options(session)
    picked = [p.report_id for p in page.platforms] if page else []
    # A picked report older than the pickers' list stays in them (else it would vanish).
    listed = {o["value"] for o in options}
    options += [o for o in _baseline_options(page) if o["value"] not in listed]
    return html.Div([
        html.H1("Across hardware: which GPU runs which configuration best"),
        html.Div([
            html.Label([html.Span("reports"), dcc.Dropdown(
                id="platforms-reports", options=options, value=picked, multi=True)],
                className="filter wide"),
            html.Label([html.Span("baseline"), dcc.Dropdown(
                id="platforms-baseline", options=_baseline_options(page),
                value=base if base is not None else (picked[0] if picked else None))],
                className="filter"),
            html.Label([html.Span("mode"), dcc.Checklist(
                id="platforms-mode", options=list(page.modes) if page else [], value=modes,
                inline=True)], className="filter"),
            html.Label([html.Span("precision"), dcc.Checklist(
                id="platforms-precision", options=list(page.precisions) if page else [],
                value=precisions, inline=True)], className="filter"),
        ], className="filters"),
        dcc.Store(id="platforms-search"),
        dcc.Store(id="platforms-search-applied"),
        dcc.Store(id="platforms-matrix-drawn"),
        html.Div(shown, id="platforms-result"),
    ])


@callback(Output("platforms-result", "children"), Output("platforms-search", "data"),
          Output("platforms-baseline", "options"),
          Input("platforms-reports", "value"), Input("platforms-baseline", "value"),
          Input("platforms-mode", "value"), Input("platforms-precision", "value"),
          prevent_initial_call=True)
def choose(ids: list[int] | None, baseline: int | None, modes: list[str] | None,
           precisions: list[str] | None) -> tuple[html.Div, str, list[dict[str, Any]]]:
    ids = [int(i) for i in ids or []] or None
    if ids is not None and baseline not in ids:
        baseline = ids[0]
    shown, page = result(ids, baseline, modes or [], precisions or [])
    return shown, query(ids, baseline, modes or [], precisions or []), _baseline_options(page)


clientside_callback(
    ClientsideFunction(namespace="platforms", function_name="matrix"),
    Output("platforms-matrix-drawn", "data"), Input("platforms-matrix-data", "data"),
)

clientside_callback(
    """function (search) {
        if (search !== undefined && search !== null && search !== window.location.search) {
            window.history.replaceState(null, '', window.location.pathname + search);
        }
        return search;
    }""",
    Output("platforms-search-applied", "data"), Input("platforms-search", "data"),
)
