"""The case page's read model: one case of a report, typed, with its verdict against
history, how close it comes to its report's roofs, its alerts, what bounds it and its
charts, built by one call (``case_page``) that the page renders."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app import figures
from app.case_view import CaseView, case_view
from app.services import cases as case_service
from app.services.alert_list import Alert, alerts_of
from app.services.case_text import case_fields
from app.services.explain import CaseAgainstHistory, case_against_history
from ingest.bounds import bound_sentence


@dataclass(frozen=True)
class CasePage:
    report_id: int
    case: CaseView
    history: CaseAgainstHistory | None  # None: the report's series does not judge it
    roofs: str  # the busiest rank's share of each roof, in words
    alerts: tuple[Alert, ...]
    charts: dict[str, figures.Spec]  # figures.case_specs, by key
    fields: tuple[tuple[str, str, str], ...]  # case_text.case_fields

    @property
    def bound(self) -> str:
        return bound_sentence(self.case.bound)


def case_page(session: Session, report_id: int, case_id: str) -> CasePage:
    """Raises NotFound when the report or the case is not there."""
    case = case_view(case_service.get_case(session, report_id, case_id))
    return CasePage(
        report_id=report_id, case=case,
        history=case_against_history(session, report_id, case),
        roofs=case_service.roof_distances_text(session, report_id, case),
        alerts=tuple(alerts_of(session, report_ids=[report_id], case_id=case_id)),
        charts=figures.case_specs(case), fields=tuple(case_fields(case)))
