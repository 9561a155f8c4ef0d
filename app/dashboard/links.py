"""The dashboard's links: built from our own ids, never from a report's strings."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from app.case_fields import CaseFilter
from app.dashboard.filters import api_query
from app.matrix_metrics import DEFAULT_METRIC


def report_href(report_id: int) -> str:
    return f"/reports/{int(report_id)}"


def case_href(report_id: int, case_id: str) -> str:
    return f"/reports/{int(report_id)}/cases/{quote(case_id, safe='')}"


def report_json_href(report_id: int) -> str:
    return f"/api/v1/reports/{int(report_id)}/report.json"


def report_export_href(report_id: int, filters: CaseFilter,
                       matrix_metric: str = DEFAULT_METRIC) -> str:
    """The HTML export of the view, opening on the matrix metric the page shows: the API
    repeats a filter where the page's URL lists."""
    query = api_query(filters)
    if matrix_metric != DEFAULT_METRIC:
        query += ("&" if query else "?") + urlencode({"matrixMetric": matrix_metric})
    return f"/api/v1/reports/{int(report_id)}/export.html{query}"


def compare_export_href(base: int, head: int) -> str:
    return f"/api/v1/compare/export.html?base={int(base)}&head={int(head)}"


def compare_href(base: int, head: int) -> str:
    return f"/compare?base={int(base)}&head={int(head)}"


def alert_href(alert_id: int) -> str:
    return f"/alerts?id={int(alert_id)}"
