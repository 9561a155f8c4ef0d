"""The dashboard's links: built from our own ids, never from a report's strings."""

from __future__ import annotations

from urllib.parse import quote

from app.case_fields import CaseFilter
from app.dashboard.filters import api_query


def report_href(report_id: int) -> str:
    return f"/reports/{int(report_id)}"


def case_href(report_id: int, case_id: str) -> str:
    return f"/reports/{int(report_id)}/cases/{quote(case_id, safe='')}"


def report_json_href(report_id: int) -> str:
    return f"/api/v1/reports/{int(report_id)}/report.json"


def report_export_href(report_id: int, filters: CaseFilter) -> str:
    """The HTML export of the view: the API repeats a filter where the page's URL lists."""
    return f"/api/v1/reports/{int(report_id)}/export.html{api_query(filters)}"


def compare_export_href(base: int, head: int) -> str:
    return f"/api/v1/compare/export.html?base={int(base)}&head={int(head)}"


def compare_href(base: int, head: int) -> str:
    return f"/compare?base={int(base)}&head={int(head)}"
