"""The platforms page as one HTML document: the same read model (``PlatformsPage``), the
same texts (``services.platforms_text``) and charts (``figures.platform_charts``)."""

from __future__ import annotations

from app.export.document import export_spec, render
from app.export.footer import Footer
from app.figures import platform_charts
from app.figures.style import Spec
from app.services import platforms_text as texts
from app.services.platforms import PlatformsPage


def charts(page: PlatformsPage) -> dict[str, Spec]:
    names = [p.name for p in page.platforms]
    specs = {f"chart-bars-{i}": export_spec(platform_charts.best_bars_spec(bars, names))
             for i, bars in enumerate(page.bars)}
    specs["chart-scatter"] = export_spec(platform_charts.peak_scatter_spec(page.scatter, names))
    return specs


def platforms_html(page: PlatformsPage, footer: Footer) -> str:
    return render(
        "platforms.html.j2", charts(page),
        title=f"moescope: {page.headline}", page=page,
        baseline=page.platforms[page.baseline],
        platform_head=texts.PLATFORM_HEAD, platforms=texts.platform_cells(page),
        geomean_head=[*texts.GEOMEAN_HEAD, *[p.name for p in page.platforms]],
        geomeans=texts.geomean_cells(page),
        winner_head=texts.winner_head(page),
        winners=[(label, [(cls, text.split("\n")) for cls, text in cells])
                 for label, cells in texts.winner_rows(page)],
        matrix_head=[*texts.MATRIX_HEAD, *[p.name for p in page.platforms]],
        rows=[(texts.row_label(r), f"{r.precision} · {r.pipeline}",
               [(texts.cell_class(c), texts.cell_lines(c)) for c in r.cells])
              for r in page.rows],
        footer=footer,
    )
