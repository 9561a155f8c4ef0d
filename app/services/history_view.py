"""A case's history as the history page draws it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any
from urllib.parse import urlencode

from sqlalchemy.orm import Session

from app import figures
from app.core.errors import NotFound
from app.figures.style import Spec
from app.repository import history as history_repo
from app.services import auth, explain
from app.services.alert_list import Alert, alerts_of
from app.services.alerts import false_alarms
from app.services.history import (
    METRICS,
    case_history,
    change_dict,
    history_path,
    mark_dict,
    point_dict,
)
from ingest.change_confirm import confirmation_text
from ingest.detector_limits import limits_text, series_limits
from ingest.regressions import Settings, Verdict

# Entries the page draws per case (half points, half buckets past it): a chart 1,000 px
# wide shows no more, and the page draws in half the time of the API's default.
PAGE_POINTS = 120
# The page draws two charts (the chosen metric, and layer time or throughput).
CHART_COUNT = 2
# More overlaid cases than this and the chart is unreadable.
MAX_OVERLAY = 8
# The page's range choices: label -> days before the newest report (None: everything).
RANGES = {"all": None, "1 year": 365, "90 days": 90, "30 days": 30}


@dataclass(frozen=True)
class HistoryView:
    case_id: str
    gpu: str
    series: str
    metric: str
    fields: dict[str, Any]
    # Oldest first, as the history endpoint gives them; a flagged one (of the newest
    # explain.MAX_ATTRIBUTED_POINTS) with "why": the phase or GPU state that moved.
    points: list[dict[str, Any]]
    buckets: list[dict[str, Any]]
    total: int
    marks: list[dict[str, Any]]
    changes: list[dict[str, Any]]  # provenance changes
    overlaid: list[str]  # the other cases drawn on the first chart
    specs: dict[str, Spec]
    other_series: list[tuple[str, str]]  # (label, href)
    metric_links: list[tuple[str, str, bool]]  # (label, href, chosen)
    range_links: list[tuple[str, str, bool]]
    overlay_links: list[tuple[str, str]]
    missing: list[str]  # overlay case ids this series does not hold
    href: str  # this page
    settings: Settings  # what judged the points


    @property
    def latest(self) -> dict[str, Any] | None:
        return self.points[-1] if self.points else None


def history_href(case_ids: Sequence[str], gpu: str, series: str, metric: str = "layerMS",
                 since: date | None = None) -> str:
    """The history page of these cases (the first one judged, the others overlaid)."""
    query: list[tuple[str, str]] = [("caseId", c) for c in case_ids]
    query += [("gpu", gpu), ("series", series)]
    if metric != "layerMS":
        query.append(("metric", metric))
    if since is not None:
        query.append(("since", since.isoformat()))
    return "/history?" + urlencode(query)


def history_view(
    session: Session, case_ids: Sequence[str], gpu: str, series: str | None,
    metric: str = "layerMS", since: date | None = None, until: date | None = None,
) -> HistoryView:
    """The history page: the first case judged, with its marks and provenance changes; the
    others (at most MAX_OVERLAY) overlaid on the chosen metric's chart."""
    if metric not in METRICS:
        raise NotFound(f"metric {metric!r} is not one of {', '.join(METRICS)}")
    case_id = case_ids[0]
    history = case_history(session, case_id, gpu, series, since=since, until=until,
                           max_points=PAGE_POINTS)
    points = [point_dict(p) for p in history.points]
    flagged = [p["reportId"] for p in points if p["status"] in ("regression", "improvement")]
    why = explain.history_attributions(session, case_id, flagged, history.settings.window)
    for point in points:
        attribution = why.get(point["reportId"])
        if attribution is not None and attribution.text():
            point["why"] = attribution.text()
    buckets = [b.as_dict() for b in history.buckets]
    marks = [mark_dict(m) for m in history.marks]
    changes = [change_dict(c) for c in history.provenance_changes]
    overlay = {}
    missing = []
    for other in [c for c in dict.fromkeys(case_ids[1:]) if c != case_id][:MAX_OVERLAY]:
        try:
            other_history = case_history(session, other, gpu, history.series, since=since,
                                         until=until, max_points=PAGE_POINTS)
        except NotFound:
            missing.append(other)
            continue
        overlay[other] = [point_dict(p) for p in other_history.points]
    chosen = [case_id, *overlay]
    newest = date.fromisoformat(points[-1]["date"][:10]) if points else None
    range_links = _range_links(chosen, gpu, history.series, metric, since, newest)
    if overlay:
        overlay_links = [("this case alone",
                          history_href([case_id], gpu, history.series, metric, since))]
    else:
        overlay_links = _sibling_links(session, case_id, gpu, history.series, metric, since,
                                       points[-1]["reportId"] if points else None)
    return HistoryView(
        case_id=case_id, gpu=gpu, series=history.series, metric=metric,
        fields=history.fields, points=points, buckets=buckets, total=history.total,
        marks=marks, changes=changes, overlaid=list(overlay),
        specs=figures.history_specs(points, buckets, changes, marks, metric, overlay,
                                    name=case_id if overlay else "this case",
                                    threshold_percent=history.settings.threshold_percent),
        other_series=[(f"series {s}", history_path(case_id, gpu, s))
                      for s in history.other_series],
        metric_links=[(label, history_href(chosen, gpu, history.series, m, since),
                       m == metric) for m, label in METRICS.items()],
        range_links=range_links,
        overlay_links=overlay_links,
        missing=missing,
        href=history_href(chosen, gpu, history.series, metric, since),
        settings=history.settings,
    )


def _range_links(chosen: list[str], gpu: str, series: str, metric: str, since: date | None,
                 newest: date | None) -> list[tuple[str, str, bool]]:
    """(label, href, chosen) of each range: the days before the newest report."""
    return [
        (label, history_href(chosen, gpu, series, metric,
                             None if days is None or newest is None
                             else newest - timedelta(days=days)),
         (since is None) if days is None else (newest is not None and since is not None
                                                and since == newest - timedelta(days=days)))
        for label, days in RANGES.items()]


def change_points_word(points: Sequence[dict[str, Any]]) -> str:
    """The change points' word on the judge's newest flag, over the points drawn in full
    (marks honoured): the judge looks first, a change point confirms or overrules it."""
    if any(p["layerMS"] is None for p in points):
        return ""
    verdicts = [Verdict(p["status"], p["baselinePoints"] or 0, p["baseline"],
                        p["changePercent"], p["noisePercent"]) for p in points]
    return confirmation_text(
        [float(p["layerMS"]) for p in points], verdicts,
        [f"report #{p['reportId']}" for p in points],
        steps=[i for i, p in enumerate(points) if "step" in p["marks"]],
        outliers=[i for i, p in enumerate(points) if "outlier" in p["marks"]])


def verdict_line(point: dict[str, Any], settings: Settings) -> str:
    """The newest point's verdict in words: what moved, by how much, and whether it is noise
    (``settings``: those that judged it)."""
    if point["status"] == "insufficient_history":
        return (f"report #{point['reportId']}: only {point['baselinePoints']} earlier "
                f"point(s); {settings.min_points} are needed before a change is judged")
    moved = f"{point['changePercent']:+.1f} %"
    versus = (f"against the median {point['baseline']:.4g} ms of the "
              f"{point['baselinePoints']} earlier points; noise {point['noisePercent']:.1f} %")
    if point["status"] == "unchanged":
        return (f"report #{point['reportId']}: {moved} {versus}: within the noise or the "
                f"{settings.threshold_percent:g} % floor")
    return f"report #{point['reportId']}: {point['status']}, layer time {moved} {versus}"


def history_rows(points: list[dict[str, Any]]) -> list[list[Any]]:
    """The points' table, newest first."""
    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.4g}"

    return [[p["date"], f"#{p['reportId']}", ms(p["layerMS"]),
             f"{ms(p['windowMinMS'])} – {ms(p['windowMaxMS'])}",
             "n/a" if p["windowSpreadPercent"] is None else f"{p['windowSpreadPercent']:.1f} %",
             f"{p['usefulTFPerGPU']:.1f}",
             "n/a" if p["percentOfPeak"] is None else f"{p['percentOfPeak']:.1f} %",
             figures.verdict_text(p) + (f"; why: {p['why']}" if p.get("why") else ""),
             ", ".join(p.get("marks", []))]
            for p in reversed(points)]


def _sibling_links(session: Session, case_id: str, gpu: str, series: str, metric: str,
                   since: date | None, newest_report: int | None) -> list[tuple[str, str]]:
    """Links overlaying the case's configuration at every precision (and pipeline), as the
    newest report holds them; one link per distinct set of cases."""
    if newest_report is None:
        return []
    links = []
    seen: set[tuple[str, ...]] = set()
    for vary, words in ((("precision",), "every precision"),
                        (("precision", "pipeline"), "every precision and pipeline")):
        siblings = history_repo.same_configuration(session, newest_report, case_id, vary)
        if len(siblings) > 1 and tuple(siblings) not in seen:
            seen.add(tuple(siblings))
            others = [c for c in siblings if c != case_id][:MAX_OVERLAY]
            links.append((f"overlay {words} of this configuration ({len(others) + 1} cases)",
                          history_href([case_id, *others], gpu, series, metric, since)))
    return links


@dataclass(frozen=True)
class HistoryPage:
    """The history screen's read model: the case's history and what the page says of it,
    and who may mark its reports."""

    view: HistoryView
    admin: str | None  # the signed-in admin (the mark controls), None for anyone else
    verdict: str  # the newest point's verdict in words ('' without a point)
    judged: str  # how each report is judged, from the settings that judged
    shape: str
    shown: str  # how many points are drawn in full, how many in buckets
    rows: tuple[list[Any], ...]  # the points' table, newest first
    alerts: tuple[Alert, ...]  # the case's, newest first
    limits: str  # the change-point detector's limits on this series, in words
    changes: str  # what the change points say of the judge's newest flag ('' if nothing)


def history_page(session: Session, case_ids: Sequence[str], gpu: str, series: str | None,
                 metric: str = "layerMS", since: date | None = None,
                 until: date | None = None, token: str | None = None) -> HistoryPage:
    """NotFound for a case, GPU, series or metric without a history."""
    view = history_view(session, case_ids, gpu, series, metric, since, until)
    s = view.settings
    judged = (f"Each report is judged against the median of up to {s.window} reports "
              f"before it: flagged when it moved over {s.threshold_percent:g} % and "
              "over the noise (the larger of the history's robust spread and the windows' "
              "spread). A report an admin marked as a step starts a new baseline; one "
              "marked as an outlier is left out of every baseline.")
    shown = f"{len(view.points)} newest in full" + (
        f", {view.total - len(view.points)} older in {len(view.buckets)} buckets"
        if view.buckets else "")
    return HistoryPage(
        view=view, admin=auth.admin_name(session, token),
        verdict=verdict_line(view.latest, s) if view.latest else "", judged=judged,
        shape=", ".join(f"{k}={v}" for k, v in view.fields.items() if k != "gpu"),
        shown=shown, rows=tuple(history_rows(view.points)),
        alerts=tuple(alerts_of(session, case_id=view.case_id)),
        limits=limits_text(series_limits(
            [float(p["layerMS"]) for p in view.points if p["layerMS"] is not None],
            false_alarms(session, view.series, view.case_id))),
        changes=change_points_word(view.points))
