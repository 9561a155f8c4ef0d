"""The case page: every field of one case shown as text."""

from __future__ import annotations

import json
from typing import Any

from app.case_fields import CaseDict


def display_value(value: Any) -> str:
    """A field's value as text, in JSON's spelling (null, true) as the wire has it."""
    if isinstance(value, float):
        return f"{value:,.6g}"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def case_fields(case: CaseDict) -> list[tuple[str, str]]:
    """Every wire and derived field (known or not), as displayable text, caveats apart."""
    return [(key, display_value(value)) for key, value in case.items() if key != "caveats"]
