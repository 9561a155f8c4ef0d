"""``moescope regressions REPORT``: the report's flagged cases, for people and for CI
(exit 1 when any case regressed, 2 when no verdict could be read). With ``--url`` from a
server, needing httpx only; from the database: cli/regressions_database.py. Both print
the regressions endpoint's document (``ReportRegressions``), so they print the same."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cli.service_client import ServiceClient
from ingest.regressions import Settings

Document = dict[str, Any]


def settings(args: argparse.Namespace) -> Settings:
    return Settings(threshold_percent=args.threshold, window=args.window)


def run(args: argparse.Namespace) -> int:
    chosen = settings(args)
    with ServiceClient(args.url, args.token, failure_status=2, timeout_s=60) as server:
        document: Document = server.get(
            f"/api/v1/reports/{args.report_id}/regressions",
            [("threshold", str(chosen.threshold_percent)),
             ("window", str(chosen.window))]).json()
    return report(document, chosen, args.json)


def report(document: Document, chosen: Settings, as_json: bool) -> int:
    """Print the document; the exit status: 1 when any case regressed, else 0."""
    items: list[Document] = document["items"]
    if as_json:
        for item in items:
            print(json.dumps(item, ensure_ascii=False))
    else:
        _print_table(document)
    counts = document["counts"]
    print(f"{counts['regression']} regression(s), {counts['improvement']} improvement(s), "
          f"{counts['unchanged']} unchanged, {counts['insufficient_history']} with fewer "
          f"than {chosen.min_points} earlier points", file=sys.stderr)
    return 1 if counts["regression"] else 0


def _print_table(document: Document) -> None:
    print(f"report {document['reportId']}: layer time against the median of the last "
          f"{document['window']} earlier points of each series "
          f"(threshold {document['thresholdPercent']:g} %)")
    for item in document["items"]:
        newest = item["baseline"] * (1 + item["changePercent"] / 100)
        print(f"  {item['kind']:<12} {item['changePercent']:+7.1f} %  {item['caseId']}  "
              f"{item['baseline']:.4g} -> {newest:.4g} ms  (median of "
              f"{item['baselinePoints']}, noise {item['noisePercent']:.1f} %)")
