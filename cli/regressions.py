"""``moescope regressions REPORT``: the report's flagged cases, for people and for CI
(exit 1 when any case regressed, or as ``--fail-on`` says; 2 when no verdict could be read),
as text, JSON lines or a Markdown summary (``cli.regressions_markdown``). With ``--url`` from a
server, needing httpx only; from the database: cli/regressions_database.py. Both print
the regressions endpoint's document (``ReportRegressions``), so they print the same."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Literal

from cli import regressions_markdown
from cli.service_client import ServiceClient
from ingest.regressions import Settings

Document = dict[str, Any]
Format = Literal["text", "json", "markdown"]
FailOn = Literal["regression", "any", "none"]


def settings(args: argparse.Namespace) -> Settings:
    return Settings(threshold_percent=args.threshold, window=args.window)


def run(args: argparse.Namespace) -> int:
    chosen = settings(args)
    with ServiceClient(args.url, args.token, failure_status=2, timeout_s=60) as server:
        document: Document = server.get(
            f"/api/v1/reports/{args.report_id}/regressions",
            [("threshold", str(chosen.threshold_percent)),
             ("window", str(chosen.window))]).json()
    return report(document, chosen, args)


def exit_status(counts: dict[str, int], fail_on: FailOn) -> int:
    """1 when the gate fails: a regression (the default), any flagged change, or never."""
    flagged = counts["regression"] + (counts["improvement"] if fail_on == "any" else 0)
    return 1 if fail_on != "none" and flagged else 0


def report(document: Document, chosen: Settings, args: argparse.Namespace) -> int:
    """Print the document in the asked format; the exit status as ``--fail-on`` says."""
    output: Format = "json" if args.json else args.format
    items: list[Document] = document["items"]
    if output == "json":
        for item in items:
            print(json.dumps(item, ensure_ascii=False))
    elif output == "markdown":
        print(regressions_markdown.render(document, args.base_url), end="")
    else:
        _print_table(document)
    counts = document["counts"]
    print(f"{counts['regression']} regression(s), {counts['improvement']} improvement(s), "
          f"{counts['unchanged']} unchanged, {counts['insufficient_history']} with fewer "
          f"than {chosen.min_points} earlier points", file=sys.stderr)
    return exit_status(counts, args.fail_on)


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
