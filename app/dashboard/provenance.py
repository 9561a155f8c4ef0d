"""The report page's host and software line (``meta.host``, as moescope's runner records it)
and its link to compare the report with the previous one of its series."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dash import dcc, html

from app.dashboard import links

# meta.host keys in the order a person reads them, with their labels; other keys follow.
HOST_FIELDS = (("hostname", "host"), ("driver", "driver"), ("cuda", "CUDA"),
               ("torch", "torch"), ("nccl", "NCCL"), ("worldSize", "world size"),
               ("gpuCount", "GPUs"), ("python", "Python"), ("backend", "backend"))


def host_facts(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) of every fact in ``meta.host`` (a value the runner could not read,
    null, is shown as "unknown" rather than dropped)."""
    host = meta.get("host")
    if not isinstance(host, Mapping):
        return []
    known = dict(HOST_FIELDS)
    keys = [k for k, _ in HOST_FIELDS if k in host] + [str(k) for k in host if k not in known]
    return [(known.get(k, k), "unknown" if host[k] is None else str(host[k])) for k in keys]


def provenance_line(meta: Mapping[str, Any], report_id: int, previous: int | None) -> html.Div:
    facts = host_facts(meta)
    shown: list[Any] = ([html.Span([f"{label} ", html.B(value)]) for label, value in facts]
                        or [html.Span("host and software not reported (no meta.host)",
                                      className="muted")])
    compare = (dcc.Link(f"compare with previous #{previous}",
                        href=links.compare_href(previous, report_id),
                        id="report-compare-previous")
               if previous is not None else
               html.Span("first report of its series (GPU and shape)", className="muted",
                         id="report-compare-previous"))
    return html.Div([*shown, html.Span(compare)], className="facts", id="report-provenance")
