"""The dashboard's links: built from our own ids, never from a report's strings."""

from __future__ import annotations

from urllib.parse import quote


def report_href(report_id: int) -> str:
    return f"/reports/{int(report_id)}"


def case_href(report_id: int, case_id: str) -> str:
    return f"/reports/{int(report_id)}/cases/{quote(case_id, safe='')}"


def report_json_href(report_id: int) -> str:
    return f"/api/v1/reports/{int(report_id)}/report.json"
