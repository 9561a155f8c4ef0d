"""What a page already shows, by digest, so that a callback sends only the parts that change.

Dash's renderer applies each output in a store update of its own, re-creates every component
of a ``children`` output it receives (one more store update each), and every store update
runs the selector of every component on the page: a filter change that re-sent every chart's
notes, every filter's options and every hidden flag spent most of its time there. A page
keeps the digests of what it shows in a ``dcc.Store``; a callback compares its outputs with
them and answers ``no_update`` for those that are the same."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import dash
from dash.development.base_component import Component


def digest(value: Any) -> str:
    """A digest of an output's value as Dash sends it (components as their JSON). The
    page's builders give their keys in one order, so none are sorted; plain ``json``, not
    plotly's encoder, which encodes everything twice (a 5,000-row table is megabytes)."""
    text = json.dumps(value, default=_component, separators=(",", ":"))
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def _component(value: Any) -> Any:
    if isinstance(value, Component):
        return value.to_plotly_json()  # type: ignore[no-untyped-call]
    raise TypeError(f"{type(value).__name__} is not an output value")


def digests(values: Sequence[Any]) -> list[str]:
    return [digest(v) for v in values]


def changed_only(values: Sequence[Any], shown: Sequence[str] | None
                 ) -> tuple[list[Any], list[str]]:
    """``values`` with ``no_update`` where the page shows the same (its digest in ``shown``),
    and the digests of ``values``, the page's new store. Without digests, or with digests of
    other outputs (their count differs), everything is sent."""
    now = digests(values)
    if shown is None or len(shown) != len(values):
        return list(values), now
    return [dash.no_update if new == old else value
            for value, new, old in zip(values, now, shown, strict=True)], now
