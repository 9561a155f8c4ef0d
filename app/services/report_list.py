"""The stored reports, newest first: a page of them for the API, the reports page's pages,
the compare page's pickers, and how to load one when there is none."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.models import ReportRow
from app.repository import pairs as pairs_repo
from app.repository import reports as reports_repo

REPORT_LIST_LIMIT = 500


def report_page(session: Session, *, limit: int, offset: int, q: str | None = None,
                gpu: str | None = None) -> tuple[list[ReportRow], int]:
    """``limit`` reports from ``offset``, newest first, matching the search ``q`` (GPU,
    source, date, run id) and ``gpu``; and how many match in all."""
    return reports_repo.list_reports(session, limit=limit, offset=offset, q=q, gpu=gpu)


def report_count(session: Session) -> int:
    return reports_repo.count_reports(session)


def latest_report_id(session: Session) -> int:
    """The newest report's id; NotFound when there is none."""
    return reports_repo.latest_report_id(session)


def report_list(session: Session, q: str | None = None) -> list[dict[str, Any]]:
    return listed_page(session, q, 1, REPORT_LIST_LIMIT)[0]


def listed_page(session: Session, q: str | None, page: int,
                per_page: int) -> tuple[list[dict[str, Any]], int]:
    """One page (from 1) of the reports matching ``q``, newest first, as the reports page
    lists them, and how many match."""
    rows, total = report_page(session, limit=per_page, offset=(page - 1) * per_page,
                              q=q or None)
    previous = pairs_repo.previous_reports(session, [row.id for row in rows])
    return [_row(row, previous.get(row.id)) for row in rows], total


def _row(row: ReportRow, previous_id: int | None) -> dict[str, Any]:
    return {
        "id": row.id, "date": row.date, "gpu": row.gpu, "runId": row.run_id or "",
        "source": row.source or "",
        "caseCount": row.case_count, "bestPercentOfPeak": row.best_percent_of_peak,
        "dataErrorCount": row.data_error_count,
        "ingestedAt": row.created_at.strftime("%Y-%m-%d %H:%M UTC"),
        # The report before it in its series (same GPU and shape): compare's default base.
        "previousId": previous_id,
    }


def load_commands(base_url: str) -> list[str]:
    """How to load data, shown on an empty reports page."""
    return [
        "moescope ingest report.json",
        "moescope ingest --url " + base_url + " --token $MOESCOPE_TOKEN report.json",
        # Double quotes: the shell must expand $MOESCOPE_TOKEN (single quotes sent it as is).
        "curl -X POST " + base_url + '/api/v1/reports -H "Authorization: Bearer $MOESCOPE_TOKEN"'
        " -H 'Content-Type: application/json' --data-binary @report.json",
    ]


def report_options(session: Session) -> list[dict[str, Any]]:
    """Picker options for the compare page: newest first."""
    return [{"label": f"#{r['id']} {r['date']} {r['gpu']}"
                      + (f" · {r['runId']}" if r["runId"] else "") + f" ({r['caseCount']} cases)",
             "value": r["id"]} for r in report_list(session)]
