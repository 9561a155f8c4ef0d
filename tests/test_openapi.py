"""The OpenAPI contract as the app builds it: operation ids that read as names, the one
Error component on every route for the statuses it can return, security as enforced,
shared enums as components, the case and summary built from the field list."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.case_schema import case_model
from app.case_fields import FIELDS, FILTERABLE, CaseField
from app.core.config import get_settings
from app.main import create_app

ERROR = {"$ref": "#/components/schemas/Error"}
OPERATIONS = {
    ("post", "/api/v1/reports"): "post_report",
    ("get", "/api/v1/reports"): "list_reports",
    ("get", "/api/v1/reports/{report_id}"): "get_report",
    ("delete", "/api/v1/reports/{report_id}"): "delete_report",
    ("post", "/api/v1/reports/{report_id}/cases"): "append_cases",
    ("get", "/api/v1/reports/{report_id}/cases"): "list_cases",
    ("get", "/api/v1/reports/{report_id}/cases/{case_id}"): "get_case",
    ("get", "/api/v1/reports/{report_id}/report.json"): "get_report_json",
    ("get", "/api/v1/reports/{report_id}/export.html"): "export_report",
    ("get", "/api/v1/reports/{report_id}/regressions"): "list_regressions",
    ("get", "/api/v1/reports/{report_id}/matrix"): "get_matrix",
    ("get", "/api/v1/compare/export.html"): "export_compare",
    ("get", "/api/v1/history"): "get_history",
    ("get", "/api/v1/reports/{report_id}/marks"): "list_marks",
    ("put", "/api/v1/reports/{report_id}/marks/{kind}"): "put_mark",
    ("delete", "/api/v1/reports/{report_id}/marks/{kind}"): "delete_mark",
    ("get", "/api/v1/platforms"): "get_platforms",
    ("get", "/api/v1/platforms/export.html"): "export_platforms",
    ("get", "/api/v1/alerts"): "list_alerts",
    ("get", "/api/v1/alerts/{alert_id}"): "get_alert",
    ("patch", "/api/v1/alerts/{alert_id}"): "triage_alert",
    ("get", "/healthz"): "healthz",
    ("get", "/readyz"): "readyz",
}
WRITES = {"400", "401", "403", "413", "415", "422", "503"}


def spec(monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, Any]:
    monkeypatch.setenv("MOESCOPE_DATABASE_URL", "sqlite://")
    for key, value in env.items():
        monkeypatch.setenv(f"MOESCOPE_{key.upper()}", value)
    get_settings.cache_clear()
    try:
        return create_app().openapi()
    finally:
        get_settings.cache_clear()


@pytest.fixture
def open_spec(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    return spec(monkeypatch)


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(method, path): op for path, ops in document["paths"].items()
            for method, op in ops.items()}


def test_operation_ids_read_as_names(open_spec: dict[str, Any]) -> None:
    assert {key: op["operationId"] for key, op in operations(open_spec).items()} == OPERATIONS


def test_every_error_status_has_the_error_body(open_spec: dict[str, Any]) -> None:
    declared: dict[str, set[str]] = {}
    for key, op in operations(open_spec).items():
        name = OPERATIONS[key]
        for status, response in op["responses"].items():
            if int(status) >= 400:
                assert response["content"]["application/json"]["schema"] == ERROR, (name, status)
        declared[name] = {s for s in op["responses"] if int(s) >= 400}
    assert "HTTPValidationError" not in open_spec["components"]["schemas"]
    assert declared["post_report"] == WRITES | {"409"}
    assert declared["append_cases"] == WRITES | {"404", "409"}
    assert declared["delete_report"] == {"401", "403", "404", "422", "503"}
    for read in ("get_report", "list_cases", "get_case", "get_report_json",
                 "list_regressions", "export_report", "get_history", "get_matrix",
                 "list_marks", "get_alert"):
        assert declared[read] == {"404", "422", "503"}, read
    assert declared["list_reports"] == declared["list_alerts"] == {"422", "503"}
    assert declared["triage_alert"] == {"401", "403", "404", "422", "503"}
    assert declared["readyz"] == {"503"} and declared["healthz"] == set()
    ops = operations(open_spec)
    for path in ("/api/v1/reports/{report_id}", "/api/v1/reports/{report_id}/cases",
                 "/api/v1/reports/{report_id}/cases/{case_id}",
                 "/api/v1/reports/{report_id}/report.json"):
        assert "304" in ops[("get", path)]["responses"], path
    created = {"$ref": "#/components/schemas/ReportCreated"}
    post = ops[("post", "/api/v1/reports")]["responses"]
    for status in ("200", "201"):
        assert post[status]["content"]["application/json"]["schema"] == created
    report = ops[("get", "/api/v1/reports/{report_id}/report.json")]["responses"]["200"]
    assert report["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Report"}


def _security(document: dict[str, Any]) -> dict[str, Any]:
    return {OPERATIONS[key]: op.get("security") for key, op in operations(document).items()}


def test_security_as_enforced(open_spec: dict[str, Any],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    bearer = [{"HTTPBearer": []}]
    opened = _security(open_spec)
    for name in ("post_report", "append_cases", "delete_report", "triage_alert"):
        assert opened[name] == bearer
    reads = [n for (method, path), n in OPERATIONS.items()
             if method == "get" and path.startswith("/api/")]
    assert all(opened[n] == [] for n in reads), opened

    closed_spec = spec(monkeypatch, require_read_token="1")
    closed = _security(closed_spec)
    assert all(closed[n] == bearer for n in reads), closed
    for (method, path), op in operations(closed_spec).items():
        if method == "get" and path.startswith("/api/"):
            assert op["responses"]["401"]["content"]["application/json"]["schema"] == ERROR


def test_shared_enums_are_components(open_spec: dict[str, Any]) -> None:
    schemas = open_spec["components"]["schemas"]
    assert schemas["Mode"]["enum"] == ["inference", "training"]
    assert schemas["SortOrder"]["enum"] == ["asc", "desc"]
    assert schemas["Verdict"]["enum"] == [
        "regression", "improvement", "unchanged", "insufficient_history"]
    assert schemas["RegressionKind"]["enum"] == ["regression", "improvement"]
    assert {"position", "layerMS", "percentOfPeak"} <= set(schemas["CaseSort"]["enum"])
    params = {p["name"]: p["schema"] for p in operations(open_spec)[
        ("get", "/api/v1/reports/{report_id}/cases")]["parameters"]}
    assert params["order"]["$ref"] == "#/components/schemas/SortOrder"
    assert params["sort"]["$ref"] == "#/components/schemas/CaseSort"
    assert params["mode"]["items"] == {"$ref": "#/components/schemas/Mode"}
    case = schemas["CaseOut"]["properties"]
    assert case["mode"] == {"$ref": "#/components/schemas/Mode", "description": "mode"}
    assert schemas["Regression"]["properties"]["kind"] == {
        "$ref": "#/components/schemas/RegressionKind"}
    assert schemas["HistoryPointOut"]["properties"]["status"] == {
        "$ref": "#/components/schemas/Verdict"}
    assert set(schemas["VerdictCounts"]["properties"]) == set(schemas["Verdict"]["enum"])


def test_case_and_summary_from_the_field_list(open_spec: dict[str, Any]) -> None:
    schemas = open_spec["components"]["schemas"]
    case = schemas["CaseOut"]
    assert set(case["properties"]) == {f.wire for f in FIELDS} | {"caveats"}
    assert case["additionalProperties"] is True  # unknown wire fields pass through
    assert case["properties"]["caveats"]["items"] == {"$ref": "#/components/schemas/Caveat"}
    assert case["properties"]["windows"] == {"$ref": "#/components/schemas/Windows",
                                             "description": "windows"}
    assert {"id", "mode", "layerMS", "windows", "caveats"} <= set(case["required"])
    assert "percentOfPeak" not in case["required"]
    facets = schemas["ReportFacets"]
    assert set(facets["properties"]) == {f.wire for f in FILTERABLE} | {"caveatCounts"}
    detail = schemas["ReportDetail"]["properties"]
    assert detail["meta"] == {"$ref": "#/components/schemas/Meta"}
    assert detail["summary"] == {"$ref": "#/components/schemas/ReportFacets"}
    page = schemas["CasePage"]["properties"]["items"]
    assert page["items"] == {"$ref": "#/components/schemas/CaseOut"}


def test_every_case_field_reaches_the_contract() -> None:
    """A field another change declares in case_fields is in the case answer's schema."""
    added = CaseField("hotRank", "hot rank", int, "hot_rank", sortable=True)
    properties = case_model((*FIELDS, added)).model_json_schema()["properties"]
    assert properties["hotRank"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert set(properties) == {f.wire for f in FIELDS} | {"hotRank", "caveats"}


def test_text_parameters_declare_that_nul_is_refused(open_spec: dict[str, Any]) -> None:
    """The server refuses NUL in any text parameter (Postgres cannot hold it); the schema
    says so, so a client or a fuzzer generating from it does not send one."""
    texts = []
    for op in operations(open_spec).values():
        for parameter in op.get("parameters", []):
            if parameter["in"] not in ("query", "path"):
                continue
            schema = parameter["schema"]
            for variant in schema.get("anyOf", [schema]):
                variant = variant.get("items", variant)
                # A date (format) is parsed, which refuses NUL by itself.
                if (variant.get("type") == "string" and "enum" not in variant
                        and "format" not in variant):
                    texts.append(parameter["name"])
                    assert variant["pattern"] == "^[^\\u0000]*$", parameter
    assert {"case_id", "caseId", "gpu", "q", "precision", "pipeline", "category"} <= set(texts)
