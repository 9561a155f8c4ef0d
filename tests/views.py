"""Cases as the read path takes them (``app.case_view.CaseView``), from the dicts the tests
build as the wire or the API has them. A test's hand-made case may name only the fields it
is about: the wire's required ones it leaves out get neutral values."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.case_view import CaseView, case_view

REQUIRED = {"id": "case", "mode": "inference", "ep": 1, "precision": "bf16", "pipeline": "standard",
            "category": "single_layer", "F": 1, "imbalance": 1.0, "layerMS": 1.0,
            "forwardMS": 1.0, "usefulTFPerGPU": 0.0, "windows": {}}


def view(case: Mapping[str, Any]) -> CaseView:
    return case_view({**case, **{k: v for k, v in REQUIRED.items() if k not in case}})


def views(cases: Iterable[Mapping[str, Any]]) -> list[CaseView]:
    return [view(c) for c in cases]
