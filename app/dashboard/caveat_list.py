"""The cases in view that carry each caveat, under the code's meaning: where a badge's click
lands. Each case links to its page, its own message on hover; past ``LINKED`` cases a line
says how many more carry it and where to find them all (a 5,000-case report put 16,000
links on the page, and built them on every filter change)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from dash import dcc, html

from app.case_view import CaseView
from app.dashboard import links
from ingest.derived import CAVEAT_CODES, CAVEAT_MEANINGS
from ingest.words import counted

LINKED = 100  # cases linked per caveat


def caveat_list(report_id: int, cases: Sequence[CaseView]) -> list[html.Div]:
    carrying: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for case in cases:
        for caveat in case.caveats:
            carrying[caveat.code].append((case.id, caveat.message))
    known = [c for c in CAVEAT_CODES if c in carrying]
    codes = known + sorted(set(carrying) - set(known))
    if not codes:
        return [html.Div("no case in view carries a caveat", className="muted")]
    return [html.Div([
        html.H4([html.Span(code, className=f"badge badge-{code}"),
                 f" {counted(len(carrying[code]), 'case')}: {CAVEAT_MEANINGS.get(code, '')}"]),
        html.Div([dcc.Link(case_id, href=links.case_href(report_id, case_id), title=message,
                           className="caveat-case")
                  for case_id, message in carrying[code][:LINKED]], className="caveat-cases"),
        *([html.Div(f"... and {len(carrying[code]) - LINKED:,} more: the case table's caveats "
                    f"column filters on {code}", className="muted")]
          if len(carrying[code]) > LINKED else []),
    ], id=f"report-caveat-{code}", className="caveat-group") for code in codes]
