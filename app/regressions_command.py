"""``moescope regressions REPORT``: the report's flagged cases, for people and for CI
(exit 1 when any case regressed, or as ``--fail-on`` says), as text, JSON lines or a
Markdown summary (``app.regressions_markdown``), from the database or, with ``--url``, from
a server.

Both read the regressions endpoint's document (``ReportRegressions``), so they print the
same; the ``--url`` path needs only httpx (it runs where the server's packages are not
installed, as on a GPU node)."""

from __future__ import annotations

import json
import sys
from typing import Any, Literal

from app import regressions_markdown
from ingest.regressions import Settings

Document = dict[str, Any]


class RegressionsFailed(Exception):
    """Why no verdict could be read (exit 2)."""


Format = Literal["text", "json", "markdown"]
FailOn = Literal["regression", "any", "none"]


def exit_status(counts: dict[str, int], fail_on: FailOn) -> int:
    """1 when the gate fails: a regression (the default), any flagged change, or never."""
    flagged = counts["regression"] + (counts["improvement"] if fail_on == "any" else 0)
    return 1 if fail_on != "none" and flagged else 0


def regressions_command(report_id: int, settings: Settings, output: Format, *,
                        fail_on: FailOn = "regression", base_url: str | None = None,
                        database_url: str | None = None, url: str | None = None,
                        token: str | None = None) -> int:
    try:
        document = (_fetch(url, token, report_id, settings) if url
                    else _read(database_url or "", report_id, settings))
    except RegressionsFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    items: list[Document] = document["items"]
    if output == "json":
        for item in items:
            print(json.dumps(item, ensure_ascii=False))
    elif output == "markdown":
        print(regressions_markdown.render(document, base_url), end="")
    else:
        _print_table(document)
    counts = document["counts"]
    print(f"{counts['regression']} regression(s), {counts['improvement']} improvement(s), "
          f"{counts['unchanged']} unchanged, {counts['insufficient_history']} with fewer "
          f"than {settings.min_points} earlier points", file=sys.stderr)
    return exit_status(counts, fail_on)


def _read(database_url: str, report_id: int, settings: Settings) -> Document:
    from app.api.history_schemas import report_regressions_out
    from app.core.db import session_scope
    from app.core.errors import NotFound
    from app.services.explain import explain
    from app.services.history import report_regressions

    with session_scope(database_url) as session:
        try:
            result = report_regressions(session, report_id, settings)
            explanation = explain(session, result)
        except NotFound as exc:
            raise RegressionsFailed(exc.detail) from exc
    return report_regressions_out(result, explanation).model_dump(mode="json")


def _fetch(url: str, token: str | None, report_id: int, settings: Settings) -> Document:
    import httpx

    from runner.http import answer_detail, resolve_token

    token = resolve_token(token)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    path = f"{url.rstrip('/')}/api/v1/reports/{report_id}/regressions"
    params = {"threshold": settings.threshold_percent, "window": settings.window}
    try:
        response = httpx.get(path, params=params, headers=headers, timeout=60)
    except httpx.HTTPError as exc:
        raise RegressionsFailed(f"cannot reach {url}: {exc}") from exc
    if response.status_code != 200:
        raise RegressionsFailed(
            f"{path}: HTTP {response.status_code}: {answer_detail(response)}")
    document: Document = response.json()
    return document


def _print_table(document: Document) -> None:
    print(f"report {document['reportId']}: layer time against the median of the last "
          f"{document['window']} earlier points of each series "
          f"(threshold {document['thresholdPercent']:g} %)")
    for group in document.get("groups") or []:
        print(f"  {group['text']}")
    for item in document["items"]:
        newest = item["baseline"] * (1 + item["changePercent"] / 100)
        why = (item.get("attribution") or {}).get("text")
        print(f"  {item['kind']:<12} {item['changePercent']:+7.1f} %  {item['caseId']}  "
              f"{item['baseline']:.4g} -> {newest:.4g} ms  (median of "
              f"{item['baselinePoints']}, noise {item['noisePercent']:.1f} %)"
              + (f"  why: {why}" if why else ""))
