"""``moescope regressions REPORT``: the report's flagged cases, for people and for CI
(exit 1 when any case regressed)."""

from __future__ import annotations

import sys

from app.api.history_schemas import regression_out
from app.core.db import session_scope
from app.core.errors import NotFound
from app.services.history import ReportVerdicts, report_regressions
from ingest.regressions import Settings


def regressions_command(report_id: int, database_url: str, settings: Settings,
                        as_json: bool) -> int:
    with session_scope(database_url) as session:
        try:
            result = report_regressions(session, report_id, settings)
        except NotFound as exc:
            print(f"error: {exc.detail}", file=sys.stderr)
            return 2
    if as_json:
        for item in result.flagged:
            print(regression_out(item, result.gpu, result.series).model_dump_json())
    else:
        _print_table(result)
    print(_summary(result), file=sys.stderr)
    return 1 if any(i.verdict.status == "regression" for i in result.items) else 0


def _print_table(result: ReportVerdicts) -> None:
    s = result.settings
    print(f"report {result.report_id}: layer time against the median of the last "
          f"{s.window} earlier points of each series (threshold {s.threshold_percent:g} %)")
    for item in result.flagged:
        v = item.verdict
        assert v.change_percent is not None and v.baseline is not None
        newest = v.baseline * (1 + v.change_percent / 100)
        print(f"  {v.status:<12} {v.change_percent:+7.1f} %  {item.case_id}  "
              f"{v.baseline:.4g} -> {newest:.4g} ms  (median of {v.baseline_points}, "
              f"noise {v.noise_percent:.1f} %)")


def _summary(result: ReportVerdicts) -> str:
    counts = dict.fromkeys(("regression", "improvement", "unchanged", "insufficient_history"), 0)
    for item in result.items:
        counts[item.verdict.status] += 1
    return (f"{counts['regression']} regression(s), {counts['improvement']} improvement(s), "
            f"{counts['unchanged']} unchanged, {counts['insufficient_history']} with fewer "
            f"than {result.settings.min_points} earlier points")
