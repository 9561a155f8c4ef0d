"""``PlatformsPage`` as CSV (one line per configuration, variant and platform, with the
configuration's winner marks) and as Markdown (the winner matrix with ratios): what the CLI
and the API's CSV print; and the texts of the page's and the export's tables."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from functools import lru_cache

from app.figures.configuration import Configuration
from app.services.platform_winners import WinnerColumn, WinnerRow
from app.services.platforms import Cell, PlatformsPage, Row

CSV_COLUMNS = ("mode", "category", "ep", "F", "imbalance", "precision", "pipeline",
               "report_id", "gpu", "useful_tf_per_gpu", "ratio_to_baseline", "tf_per_watt",
               "best", "tied", "not_run_reason", "shape_differs", "layer_ms",
               "percent_of_peak", "percent_of_measured_ceiling", "compute_util_percent",
               "hbm_util_percent", "nvlink_util_percent", "limiter",
               "best_of_configuration", "tied_of_configuration")


def _num(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


@lru_cache(maxsize=32)
def platforms_json(page: PlatformsPage) -> bytes:
    """The API's JSON: the read model, its headline added (cached per page object, and
    the service hands the same object out while its reports are unchanged)."""
    body = {**dataclasses.asdict(page), "headline": page.headline}
    return json.dumps(body, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")


def _winner_cells(page: PlatformsPage) -> dict[tuple[Configuration, str, str, int], Cell]:
    return {(row.configuration, column.precision, column.pipeline, column.platform): cell
            for row in page.winners.rows
            for column, cell in zip(page.winners.columns, row.cells, strict=True)}


@lru_cache(maxsize=32)
def platforms_csv(page: PlatformsPage) -> str:
    """best, tied: among the platforms for the variant; *_of_configuration: among every
    platform and variant of the configuration (the winner matrix's marks)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    winners = _winner_cells(page)
    for row in page.rows:
        c = row.configuration
        for i, (platform, cell) in enumerate(zip(page.platforms, row.cells, strict=True)):
            won = winners[(c, row.precision, row.pipeline, i)]
            writer.writerow([c.mode, c.category, c.ep, c.F, f"{c.imbalance:g}", row.precision,
                             row.pipeline, platform.report_id, platform.gpu,
                             _num(cell.useful_tf, 1), _num(cell.ratio, 4),
                             _num(cell.tf_per_watt, 4), int(cell.best), int(cell.tied),
                             cell.reason or "", int(row.shape_differs),
                             _num(cell.layer_ms, 4), _num(cell.percent_of_peak, 2),
                             _num(cell.percent_of_ceiling, 2), _num(cell.compute_util, 1),
                             _num(cell.hbm_util, 1), _num(cell.nvlink_util, 1),
                             cell.limiter or "", int(won.best), int(won.tied)])
    return out.getvalue()


def _cell_md(cell: Cell) -> str:
    if cell.useful_tf is None:
        return cell.reason or "—"
    text = f"{cell.useful_tf:.0f}"
    if cell.ratio is not None:
        text += f" ({cell.ratio:.2f}×)"
    if cell.tied:
        return f"≈ {text}"
    return f"**{text}**" if cell.best else text


def platforms_markdown(page: PlatformsPage) -> str:
    heads = [p.name for p in page.platforms]
    base = page.platforms[page.baseline]
    matrix = page.winners
    lines = [f"# {page.headline}", "",
             *[f"- {p.name}: {p.gpu}, {p.date}; peaks {p.peaks_text}; shape {p.shape_text}"
               for p in page.platforms], "",
             f"Useful TFLOP/s per GPU; ratio to {base.name} in the same precision · "
             "pipeline. **bold**: the configuration's best over every platform and "
             "variant; ≈: tied with it within noise; †: shapes differ.", "",
             "| configuration | " + " | ".join(column_label(page, c) for c in matrix.columns)
             + " |", "|---|" + "---|" * len(matrix.columns)]
    for row in matrix.rows:
        mark = " †" if row.shape_differs else ""
        label = f"{row.configuration.mode} {row.configuration.label(with_category=True)}"
        lines.append(f"| {label}{mark} | " + " | ".join(_cell_md(c) for c in row.cells) + " |")
    lines += ["", "Geometric mean of ratios per (mode, precision):", "",
              "| mode | precision | " + " | ".join(heads) + " |",
              "|---|---|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(cells) + " |" for cells in geomean_cells(page)]
    return "\n".join(lines) + "\n"


def column_label(page: PlatformsPage, column: WinnerColumn) -> str:
    return f"{page.platforms[column.platform].name} {column.precision} · {column.pipeline}"


# The winner matrix as the page and the export show it: a header row of platforms, each
# spanning its variants, a row of variants under it; one short text per cell.
def winner_head(page: PlatformsPage) -> tuple[list[tuple[str, int]], list[str]]:
    """([(platform name, how many variant columns it spans)], [each column's variant])."""
    variants = page.winners.variants
    return ([(p.name, len(variants)) for p in page.platforms],
            [f"{precision} · {pipeline}" for _ in page.platforms
             for precision, pipeline in variants])


def winner_text(cell: Cell) -> str:
    """'≈ 1,234' or 'best 1,234' and the ratio under it; 'not run' or the reason."""
    if cell.useful_tf is None:
        return cell.reason or "no result"
    mark = "≈ " if cell.tied else "best " if cell.best else ""
    ratio = "" if cell.ratio is None else f"\n{cell.ratio:.2f}×"
    return f"{mark}{cell.useful_tf:,.0f}{ratio}"


def winner_rows(page: PlatformsPage) -> list[tuple[str, list[tuple[str, str]]]]:
    return [(row_label(row), [(cell_class(c), winner_text(c)) for c in row.cells])
            for row in page.winners.rows]


# The detail table: a row per configuration and variant, a column per platform.
MATRIX_HEAD = ("configuration", "precision · pipeline")


def row_label(row: Row | WinnerRow) -> str:
    mark = " (shapes differ)" if row.shape_differs else ""
    return f"{row.configuration.mode} {row.configuration.label(with_category=True)}{mark}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def cell_lines(cell: Cell) -> list[str]:
    """'≈ 1,234 TF/GPU (0.85×)', '41.2 % of peak · 63.0 % of ceiling',
    'busiest rank: compute 41 · HBM 12 · NVLink 80 % → nvlink', '1.23 TF/W'."""
    if cell.useful_tf is None:
        return [cell.reason or "no result"]
    first = f"{cell.useful_tf:,.0f} TF/GPU"
    if cell.ratio is not None:
        first += f" ({cell.ratio:.2f}×)"
    first = ("≈ " if cell.tied else "best: " if cell.best else "") + first
    lines = [first,
             f"{_pct(cell.percent_of_peak)} % of peak · {_pct(cell.percent_of_ceiling)} % of "
             f"ceiling · {_num(cell.layer_ms, 3)} ms",
             f"busiest rank: compute {_pct(cell.compute_util)} · HBM {_pct(cell.hbm_util)} · "
             f"NVLink {_pct(cell.nvlink_util)} % → {cell.limiter or 'n/a'}"]
    if cell.tf_per_watt is not None:
        lines.append(f"{cell.tf_per_watt:.3f} TF/W (at peak power)")
    if cell.reason:
        lines.append(cell.reason)
    return lines


def cell_class(cell: Cell) -> str:
    return ("not-run" if cell.useful_tf is None else "tied" if cell.tied
            else "best" if cell.best else "")


GEOMEAN_HEAD = ("mode", "precision")


def geomean_cells(page: PlatformsPage) -> list[list[str]]:
    return [[g.mode, g.precision, *["—" if r is None else f"{r:.3f}× (n={n})"
                                    for r, n in zip(g.ratios, g.count, strict=True)]]
            for g in page.geomeans]


PLATFORM_HEAD = ("platform", "GPU", "date", "peaks (theoretical)", "shape")


def platform_cells(page: PlatformsPage) -> list[list[str]]:
    return [[p.name + (" (baseline)" if i == page.baseline else ""), p.gpu, p.date,
             p.peaks_text, p.shape_text] for i, p in enumerate(page.platforms)]
