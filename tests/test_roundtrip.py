"""The reference report goes in and comes back exactly, on both databases."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient


def test_reference_round_trip_is_exact(
    client: TestClient, auth: Callable[[str], dict[str, str]], reference: dict[str, Any]
) -> None:
    posted = client.post("/api/v1/reports", json=reference, headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    assert posted.json() == {"id": posted.json()["id"], "caseCount": 63, "created": True}

    back = client.get(f"/api/v1/reports/{posted.json()['id']}/report.json")
    assert back.status_code == 200
    document = back.json()
    assert document == reference
    # json-equal is not enough for floats: compare their exact text too.
    assert json.dumps(document, sort_keys=True) == json.dumps(reference, sort_keys=True)


def test_unknown_fields_come_back_unchanged(
    client: TestClient, auth: Callable[[str], dict[str, str]], reference: dict[str, Any]
) -> None:
    reference["schemaVersion"] = 7
    reference["meta"]["futureNote"] = "measured on a Tuesday"
    reference["meta"]["shape"]["routerType"] = {"kind": "sigmoid", "bias": [0.5, -1e-300]}
    reference["cases"][5]["l2HitRate"] = 0.8123456789012345
    reference["cases"][5]["windows"]["dispatch"] = [0.1, 0.2]
    posted = client.post("/api/v1/reports", json=reference, headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    report_id = posted.json()["id"]

    assert client.get(f"/api/v1/reports/{report_id}/report.json").json() == reference
    case = client.get(f"/api/v1/reports/{report_id}/cases/{reference['cases'][5]['id']}").json()
    assert case["l2HitRate"] == 0.8123456789012345
    assert case["windows"]["dispatch"] == [0.1, 0.2]
    notes = client.get(f"/api/v1/reports/{report_id}").json()["caveats"]
    assert {"key": "futureNote", "qualifies": None, "text": "measured on a Tuesday"} in notes
