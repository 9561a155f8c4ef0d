"""``moescope regressions --format markdown``: the regressions document (the endpoint's
``ReportRegressions``) as a summary fit for a pull-request comment: the groups first (what
moved and how much), then every flagged case with its noise and the phase that moved, and
links to the pages when a base URL is given."""

from __future__ import annotations

import re
from typing import Any

from ingest.why import phase_phrase

Document = dict[str, Any]

# Characters that would make a report's string into markup, a link or a table cell break.
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")


def md(value: Any) -> str:
    """A report's string as literal Markdown text (GitHub flavour), on one line."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(value).split()))


def _link(label: str, url: str | None) -> str:
    return f"[{label}]({url})" if url else label


def _url(base_url: str | None, path: str) -> str | None:
    return f"{base_url.rstrip('/')}{path}" if base_url else None


def case_line(item: Document, base_url: str | None) -> str:
    newest = item["baseline"] * (1 + item["changePercent"] / 100)
    why = (item.get("attribution") or {}).get("text") or "no phases or GPU state to compare"
    case = _link(md(item["caseId"]), _url(base_url, item["historyUrl"]))
    return (f"| {item['kind']} | {case} | {item['changePercent']:+.1f} % "
            f"({item['baseline']:.4g} → {newest:.4g} ms, median of {item['baselinePoints']}) "
            f"| {item['noisePercent']:.1f} % | {md(why)} |")


def _where(group: Document, items: list[Document]) -> str:
    """The phase the group's cases moved in (ingest.why's words)."""
    members = set(group["caseIds"])
    moves = []
    for item in items:
        if item["caseId"] in members:
            attribution = item.get("attribution") or {}
            top = attribution.get("topPhase")
            change = next((p["changePercent"] for p in attribution.get("phases") or []
                           if p["phase"] == top), None)
            moves.append((top, change))
    return phase_phrase(moves) if moves else ""


def render(document: Document, base_url: str | None = None) -> str:
    counts = document["counts"]
    report_id = document["reportId"]
    total = sum(counts.values())
    lines = [
        f"### moescope: report {report_id} against its history",
        "",
        f"**{counts['regression']} regression(s), {counts['improvement']} improvement(s)** "
        f"of {total} cases ({counts['unchanged']} unchanged, "
        f"{counts['insufficient_history']} with too little history): layer time against "
        f"the median of up to {document['window']} earlier reports of each case's series, "
        f"flagged past {document['thresholdPercent']:g} % and past the case's noise.",
    ]
    groups = document.get("groups") or []
    items = document["items"]
    if groups:
        lines += ["", "| verdict | cases | layer time change | where |", "|---|---|---|---|"]
        for g in groups:
            count = len(g["caseIds"])
            of = f" of {g['ofTotal']}" if g.get("ofTotal") and g["ofTotal"] != count else ""
            span = (f"{g['lowPercent']:+.1f} %" if round(g["lowPercent"], 1) == round(
                g["highPercent"], 1) else f"{g['lowPercent']:+.1f} % to {g['highPercent']:+.1f} %")
            noun = "case" if count == 1 and not of else "cases"
            lines.append(f"| {g['status']} | {count}{of} {md(g['label'])} {noun} | {span} "
                         f"| {md(_where(g, items))} |")
    if items:
        lines += ["", "<details><summary>Every flagged case</summary>", "",
                  "| verdict | case (its history) | layer time | noise | why |",
                  "|---|---|---|---|---|",
                  *[case_line(item, base_url) for item in items], "", "</details>"]
    links = [_link(f"report {report_id}", _url(base_url, f"/reports/{report_id}"))]
    previous = document.get("previousReportId")
    if previous is not None:
        links.append(_link(f"compare with report {previous}", _url(
            base_url, f"/compare?base={int(previous)}&head={int(report_id)}")))
    if base_url:
        lines += ["", " · ".join(links)]
    return "\n".join(lines) + "\n"
