"""``PlatformsPage`` as CSV (one line per configuration and platform) and as Markdown (the
winner matrix with ratios): what the CLI and the API's CSV would print."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from functools import lru_cache

from app.services.platforms import Cell, PlatformsPage, Row

CSV_COLUMNS = ("mode", "category", "ep", "F", "imbalance", "precision", "pipeline",
               "report_id", "gpu", "useful_tf_per_gpu", "ratio_to_baseline", "tf_per_watt",
               "best", "tied", "not_run_reason", "shape_differs", "layer_ms",
               "percent_of_peak", "percent_of_measured_ceiling", "compute_util_percent",
               "hbm_util_percent", "nvlink_util_percent", "limiter")


def _num(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


@lru_cache(maxsize=32)
def platforms_json(page: PlatformsPage) -> bytes:
    """The API's JSON: the read model, its headline added (cached per page object, and
    the service hands the same object out while its reports are unchanged)."""
    body = {**dataclasses.asdict(page), "headline": page.headline}
    return json.dumps(body, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")


@lru_cache(maxsize=32)
def platforms_csv(page: PlatformsPage) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in page.rows:
        c = row.configuration
        for platform, cell in zip(page.platforms, row.cells, strict=True):
            writer.writerow([c.mode, c.category, c.ep, c.F, f"{c.imbalance:g}", row.precision,
                             row.pipeline, platform.report_id, platform.gpu,
                             _num(cell.useful_tf, 1), _num(cell.ratio, 4),
                             _num(cell.tf_per_watt, 4), int(cell.best), int(cell.tied),
                             cell.reason or "", int(row.shape_differs),
                             _num(cell.layer_ms, 4), _num(cell.percent_of_peak, 2),
                             _num(cell.percent_of_ceiling, 2), _num(cell.compute_util, 1),
                             _num(cell.hbm_util, 1), _num(cell.nvlink_util, 1),
                             cell.limiter or ""])
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
    lines = [f"# {page.headline}", "",
             *[f"- {p.name}: {p.gpu}, {p.date}; peaks {p.peaks_text}; shape {p.shape_text}"
               for p in page.platforms], "",
             f"Useful TFLOP/s per GPU; ratio to {base.name}. "
             "**bold**: best; ≈: tied within noise; †: shapes differ.", "",
             "| configuration | precision · pipeline | " + " | ".join(heads) + " |",
             "|---|---|" + "---|" * len(heads)]
    for row in page.rows:
        mark = " †" if row.shape_differs else ""
        label = f"{row.configuration.mode} {row.configuration.label(with_category=True)}"
        cells = " | ".join(_cell_md(c) for c in row.cells)
        lines.append(f"| {label}{mark} | {row.precision} · {row.pipeline} | {cells} |")
    lines += ["", "Geometric mean of ratios per (mode, precision):", "",
              "| mode | precision | " + " | ".join(heads) + " |",
              "|---|---|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(cells) + " |" for cells in geomean_cells(page)]
    return "\n".join(lines) + "\n"


# The winner matrix as the page and the export show it: one text per platform cell.
MATRIX_HEAD = ("configuration", "precision · pipeline")


def row_label(row: Row) -> str:
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
