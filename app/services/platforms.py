"""Across hardware (issue 25, DESIGN.md "Across hardware"): one typed, frozen read model,
``PlatformsPage``, built from N reports and a baseline. Cases are matched across reports by
(mode, ep, precision, pipeline, F, imbalance, category), never by case id, so reports of
different GPUs and shapes line up; a matched pair is marked where meta.shape differs."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from threading import Lock
from typing import Any

from sqlalchemy.orm import Session

from app.case_view import CaseView
from app.core.errors import NotFound
from app.figures.configuration import (
    Configuration,
    configuration,
    rank,
    variant,
    variant_key,
)
from app.figures.platform_charts import BestBars, PeakPoints
from app.repository import reports as reports_repo
from app.services.cases import case_views
from app.services.platform_winners import WinnerMatrix, mark_best, winner_matrix

_SHAPE_KEYS = ("T", "D", "E", "K")
MatchKey = tuple[Configuration, str, str]  # configuration, precision, pipeline


# At most this many GPUs in the default pick: a page of more platforms is unreadable.
DEFAULT_PICK = 8


def short_gpu(gpu: str) -> str:
    """'NVIDIA Blackwell Ultra / GB300 NVL72' -> 'GB300 NVL72'; 'NVIDIA H200' -> 'H200'."""
    name = gpu.rsplit(" / ", 1)[-1].strip()
    for vendor in ("NVIDIA ", "AMD "):
        name = name.removeprefix(vendor)
    return name or gpu


@dataclass(frozen=True)
class Platform:
    report_id: int
    gpu: str
    date: str
    peaks: tuple[tuple[str, float], ...]  # precision -> theoretical TF/GPU, as the report names
    shape: tuple[tuple[str, int], ...]  # (T, D, E, K)

    @property
    def name(self) -> str:
        return f"{short_gpu(self.gpu)} #{self.report_id}"

    @property
    def peaks_text(self) -> str:
        return ", ".join(f"{p} {v:,.0f}" for p, v in self.peaks) + " TF/GPU"

    @property
    def shape_text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.shape)


@dataclass(frozen=True)
class PlatformInput:
    """One report as the model needs it; the service reads it, tests build it."""

    platform: Platform
    cases: Sequence[CaseView]


@dataclass(frozen=True)
class Cell:
    useful_tf: float | None  # None: not run
    reason: str | None  # why not run / no result, where the report says
    ratio: float | None  # to the baseline's cell
    tf_per_watt: float | None
    best: bool
    tied: bool  # within noise of the best: shown with ≈
    layer_ms: float | None = None
    percent_of_peak: float | None = None
    percent_of_ceiling: float | None = None
    # The busiest rank's utilisations (derived at ingest) and the roof they point to.
    compute_util: float | None = None
    hbm_util: float | None = None
    nvlink_util: float | None = None
    limiter: str | None = None
    noise_percent: float | None = None  # the case's windowSpreadPercent: ties are within it
    caveats: tuple[str, ...] = ()  # codes; one of ingest.ties.NEVER_BEST: never the best


NOT_RUN = Cell(useful_tf=None, reason="not run", ratio=None, tf_per_watt=None, best=False,
               tied=False)


@dataclass(frozen=True)
class Row:
    configuration: Configuration
    precision: str
    pipeline: str
    cells: tuple[Cell, ...]  # one per platform, in the page's order
    shape_differs: bool  # a matched pair whose reports' (T, D, E, K) differ


@dataclass(frozen=True)
class GeoMean:
    mode: str
    precision: str
    ratios: tuple[float | None, ...]  # per platform, over configurations both ran
    count: tuple[int, ...]


# eq=False: hashed by identity, so a cached page's renderings can be cached by it.
@dataclass(frozen=True, eq=False)
class PlatformsPage:
    platforms: tuple[Platform, ...]
    baseline: int  # index into platforms
    rows: tuple[Row, ...]
    geomeans: tuple[GeoMean, ...]
    matched: int  # rows every platform ran
    total: int
    bars: tuple[BestBars, ...] = ()  # one per (mode, category)
    scatter: tuple[PeakPoints, ...] = ()  # one per platform
    modes: tuple[str, ...] = ()  # every mode and precision of the picked reports, filtered
    precisions: tuple[str, ...] = ()  # or not: what the page's filters offer
    winners: WinnerMatrix = WinnerMatrix()  # a row per configuration, platform x variant

    @property
    def headline(self) -> str:
        return cross_headline([p.gpu for p in self.platforms],
                              len({p.peaks for p in self.platforms}) > 1,
                              len({p.shape for p in self.platforms}) > 1,
                              self.matched, self.total)


def cross_headline(gpus: Sequence[str], peaks_differ: bool, shapes_differ: bool,
                   matched: int, total: int) -> str:
    """'GB300 NVL72 vs H200: peaks differ, matched by configuration: 6 of 63'."""
    names = " vs ".join(short_gpu(g) for g in gpus)
    differ = [w for w, d in (("peaks", peaks_differ), ("shapes", shapes_differ)) if d]
    said = f"{' and '.join(differ)} differ, " if differ else ""
    return f"{names}: {said}matched by configuration: {matched} of {total}"


def _reason(case: CaseView) -> str | None:
    return ", ".join(c.code for c in case.caveats) or None


def _tf_per_watt(case: CaseView) -> float | None:
    # The wire gives the peak power over the timed windows: TF/W is a lower bound.
    watts = case.number("gpuState.powerMaxW")
    tf = case.usefulTFPerGPU
    if not watts or tf is None:
        return None
    return tf / watts


def _measures(case: CaseView | None) -> dict[str, Any]:
    if case is None:
        return {}
    return {"layer_ms": case.layerMS,
            "percent_of_peak": case.percentOfPeak,
            "percent_of_ceiling": case.percentOfMeasuredCeiling,
            "compute_util": case.computeUtilPercent,
            "hbm_util": case.hbmUtilPercent,
            "nvlink_util": case.nvlinkUtilPercent,
            "limiter": case.limiter}


def _index(cases: Sequence[CaseView]) -> dict[MatchKey, CaseView]:
    return {(configuration(c), *variant(c)): c for c in cases}


def _row(key: MatchKey, found: list[CaseView | None], baseline: int,
         shapes: list[tuple[tuple[str, int], ...]]) -> Row:
    base = found[baseline]
    base_tf = base.usefulTFPerGPU if base is not None else None
    cells = []
    for case in found:
        tf = case.usefulTFPerGPU if case is not None else None
        cells.append(NOT_RUN if case is None else Cell(
            **_measures(case),
            useful_tf=None if tf is None else float(tf),
            reason=_reason(case) if tf is None else None,
            ratio=float(tf) / float(base_tf) if tf is not None and base_tf else None,
            tf_per_watt=_tf_per_watt(case), best=False, tied=False,
            noise_percent=case.windowSpreadPercent,
            caveats=tuple(sorted(case.caveat_codes))))
    ran = {shapes[i] for i, c in enumerate(found) if c is not None}
    return Row(key[0], key[1], key[2], mark_best(cells), len(ran) > 1)


def _geomeans(rows: Sequence[Row], n: int) -> tuple[GeoMean, ...]:
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.configuration.mode, row.precision), []).append(row)
    out = []
    for (mode, precision), members in sorted(groups.items()):
        ratios: list[float | None] = []
        counts: list[int] = []
        for i in range(n):
            present = [r.cells[i].ratio for r in members]
            logs = [math.log(x) for x in present if x is not None and x > 0]
            ratios.append(math.exp(sum(logs) / len(logs)) if logs else None)
            counts.append(len(logs))
        out.append(GeoMean(mode, precision, tuple(ratios), tuple(counts)))
    return tuple(out)


def _bars(rows: Sequence[Row], n: int) -> tuple[BestBars, ...]:
    groups: dict[tuple[str, str], dict[Configuration, list[Row]]] = {}
    for row in rows:
        c = row.configuration
        groups.setdefault((c.mode, c.category), {}).setdefault(c, []).append(row)
    out = []
    for (mode, category), configs in groups.items():
        values: list[tuple[float | None, ...]] = []
        variants: list[tuple[str, ...]] = []
        for i in range(n):
            best = [max(((r.cells[i].useful_tf, f"{r.precision} · {r.pipeline}")
                         for r in members if r.cells[i].useful_tf is not None),
                        default=(None, "")) for members in configs.values()]
            values.append(tuple(v for v, _ in best))
            variants.append(tuple(w for _, w in best))
        out.append(BestBars(mode, category, tuple(c.label() for c in configs),
                            tuple(values), tuple(variants)))
    return tuple(out)


def _scatter(rows: Sequence[Row], n: int) -> tuple[PeakPoints, ...]:
    out = []
    for i in range(n):
        cells = [(r, r.cells[i]) for r in rows if r.cells[i].useful_tf is not None
                 and r.cells[i].percent_of_peak is not None]
        out.append(PeakPoints(
            tuple(float(c.percent_of_peak or 0) for _, c in cells),
            tuple(float(c.useful_tf or 0) for _, c in cells),
            tuple(f"{r.configuration.label(with_category=True)} {r.precision} · {r.pipeline}"
                  for r, _ in cells)))
    return tuple(out)


def build_platforms(inputs: Sequence[PlatformInput], baseline: int = 0, *,
                    modes: Sequence[str] = (), precisions: Sequence[str] = ()) -> PlatformsPage:
    """``modes``, ``precisions``: the configurations to keep (none given: all)."""
    if not inputs:
        raise ValueError("reports: pick at least one report")
    if not 0 <= baseline < len(inputs):
        raise ValueError(f"baseline: {baseline} is not one of the picked reports")
    indexes = [_index(i.cases) for i in inputs]
    every = {k for index in indexes for k in index}
    keys = sorted((k for k in every if (not modes or k[0].mode in modes)
                   and (not precisions or k[1] in precisions)),
                  key=lambda k: (k[0].sort_key(), k[0].category, variant_key((k[1], k[2]))))
    shapes = [i.platform.shape for i in inputs]
    rows = tuple(_row(k, [index.get(k) for index in indexes], baseline, shapes) for k in keys)
    matched = sum(all(c.reason != "not run" for c in r.cells)
                  for r in rows)
    n = len(inputs)
    return PlatformsPage(
        tuple(i.platform for i in inputs), baseline, rows, _geomeans(rows, n), matched,
        len(rows), _bars(rows, n), _scatter(rows, n),
        tuple(sorted({k[0].mode for k in every}, key=lambda m: rank("mode", m))),
        tuple(sorted({k[1] for k in every}, key=lambda p: rank("precision", p))),
        winner_matrix(rows, n, NOT_RUN))


def platform_of(report_id: int, gpu: str, date: str, meta: dict[str, Any]) -> Platform:
    peaks = meta.get("theoreticalTFPerGPU") or {}
    shape = meta.get("shape") or {}
    return Platform(report_id, gpu, date,
                    tuple((str(k), float(v)) for k, v in sorted(peaks.items())),
                    tuple((k, int(shape[k])) for k in _SHAPE_KEYS if k in shape))


def default_pick(session: Session) -> list[int]:
    """The newest report of each GPU in the database (any series), newest first."""
    return [i for i, _ in reports_repo.newest_per_gpu(session, DEFAULT_PICK)]


def platforms_page(session: Session, report_ids: Sequence[int] | None,
                   baseline_id: int | None = None, *, modes: Sequence[str] = (),
                   precisions: Sequence[str] = ()) -> PlatformsPage:
    """The page for ``report_ids`` (None: ``default_pick``) against ``baseline_id``
    (default: the first picked)."""
    if report_ids is None:
        report_ids = default_pick(session)
        if not report_ids:
            raise NotFound("the database holds no report")
    key = (tuple(report_ids), tuple(reports_repo.report_versions(session, report_ids)),
           baseline_id, tuple(modes), tuple(precisions))
    with _LOCK:
        found = _PAGES.get(key)
        if found is not None:
            _PAGES.move_to_end(key)
            return found
    page = _read_page(session, report_ids, baseline_id, modes, precisions)
    with _LOCK:
        _PAGES[key] = page
        while len(_PAGES) > _CACHED_PAGES:
            _PAGES.popitem(last=False)
    return page


# Pages by (ids, their report_version, baseline, filters): a report's version changes with
# any change to it, so a page is never stale. Decoding eight reports' cases is most of a
# request; a page is looked at again and again (the page, its API, its export).
_CACHED_PAGES = 32
_PAGES: OrderedDict[tuple[Any, ...], PlatformsPage] = OrderedDict()
_LOCK = Lock()


def _read_page(session: Session, report_ids: Sequence[int], baseline_id: int | None,
               modes: Sequence[str], precisions: Sequence[str]) -> PlatformsPage:
    inputs = []
    for report_id in report_ids:
        row = reports_repo.get_report(session, report_id)
        inputs.append(PlatformInput(platform_of(row.id, row.gpu, row.date, row.meta),
                                    case_views(session, report_id)))
    baseline = 0 if baseline_id is None else list(report_ids).index(baseline_id) \
        if baseline_id in report_ids else -1
    return build_platforms(inputs, baseline, modes=modes, precisions=precisions)
