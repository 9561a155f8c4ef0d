"""The alerts a page links (report, compare, history, case): a listing only. Apart from
``services.alerts`` (detection, triage, webhooks) so that reading a page, or exporting
one from the command line, does not import the detector and the webhook client."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from app.repository import alerts as alerts_repo

Alert = alerts_repo.Alert


def alerts_of(session: Session, *, report_ids: Sequence[int] | None = None,
              case_id: str | None = None, limit: int = 20) -> list[Alert]:
    """The alerts a page links: those of some reports (opened by or first bad at them),
    or of one case; newest first."""
    return alerts_repo.list_alerts(session, report_ids=report_ids, case_id=case_id,
                                   limit=limit)[0]
