"""The OpenAPI document's parts that routes cannot declare themselves: the bodies they
parse themselves (strict JSON, see ``json_body``), and what depends on the settings the
app is built with (whether reads need a token, the reports list's page size)."""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel

from app.core.config import Settings

_REF = "#/components/schemas/{model}"
_defs: dict[str, Any] = {}


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template=_REF)
    _defs.update(schema.pop("$defs", {}))
    _defs[model.__name__] = schema
    ref = {"$ref": _REF.format(model=model.__name__)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}


def add_body_schemas(openapi: dict[str, Any]) -> dict[str, Any]:
    openapi.setdefault("components", {}).setdefault("schemas", {}).update(_defs)
    return openapi


def operation_id(route: APIRoute) -> str:
    """The route function's name (``list_cases``, ``get_report``): what a generated client
    calls the operation. A route whose function name would not read so sets its own."""
    return route.name


def apply_settings(openapi: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Declare security as enforced: reads (GET) need a bearer token, and can answer 401,
    only with MOESCOPE_REQUIRE_READ_TOKEN (their read dependency takes the bearer header,
    so FastAPI declares it on every read). And the reports list's ``limit`` maximum."""
    for path, operations in openapi.get("paths", {}).items():
        read = operations.get("get")
        if read is None or not path.startswith("/api/"):
            continue
        if settings.require_read_token:
            read["security"] = [{"HTTPBearer": []}]
        else:
            read["security"] = []
            read.get("responses", {}).pop("401", None)
    for parameter in openapi["paths"]["/api/v1/reports"]["get"]["parameters"]:
        if parameter["name"] == "limit":
            parameter["schema"]["maximum"] = settings.page_size_max
    return openapi
