"""``PlatformsPage`` as CSV (one line per configuration and platform) and as Markdown (the
winner matrix with ratios): what the CLI and the API's CSV would print."""

from __future__ import annotations

import csv
import io

from app.services.platforms import Cell, PlatformsPage

CSV_COLUMNS = ("mode", "category", "ep", "F", "imbalance", "precision", "pipeline",
               "report_id", "gpu", "useful_tf_per_gpu", "ratio_to_baseline", "tf_per_watt",
               "best", "tied", "not_run_reason", "shape_differs")


def _num(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


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
                             cell.reason or "", int(row.shape_differs)])
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
    heads = [f"{p.gpu} #{p.report_id}" for p in page.platforms]
    base = page.platforms[page.baseline]
    lines = [f"# {page.headline}", "",
             f"Useful TFLOP/s per GPU; ratio to {base.gpu} #{base.report_id}. "
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
    for g in page.geomeans:
        ratios = " | ".join("—" if r is None else f"{r:.3f}× (n={n})"
                            for r, n in zip(g.ratios, g.count, strict=True))
        lines.append(f"| {g.mode} | {g.precision} | {ratios} |")
    return "\n".join(lines) + "\n"
