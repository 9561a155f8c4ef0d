"""The cases in view that carry each caveat, under the code's meaning: where a badge's click
lands. Each case links to its page, its own message on hover."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from dash import dcc, html

from app.case_fields import CaseDict
from app.dashboard import links
from ingest.derived import CAVEAT_CODES, CAVEAT_MEANINGS


def caveat_list(report_id: int, cases: Sequence[CaseDict]) -> list[html.Div]:
    carrying: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for case in cases:
        for caveat in case.get("caveats") or []:
            carrying[str(caveat["code"])].append((str(case["id"]), str(caveat["message"])))
    known = [c for c in CAVEAT_CODES if c in carrying]
    codes = known + sorted(set(carrying) - set(known))
    if not codes:
        return [html.Div("no case in view carries a caveat", className="muted")]
    return [html.Div([
        html.H4([html.Span(code, className=f"badge badge-{code}"),
                 f" {len(carrying[code])} case(s): {CAVEAT_MEANINGS.get(code, '')}"]),
        html.Div([dcc.Link(case_id, href=links.case_href(report_id, case_id), title=message,
                           className="caveat-case")
                  for case_id, message in carrying[code]], className="caveat-cases"),
    ], id=f"report-caveat-{code}", className="caveat-group") for code in codes]
