"""OpenAPI for bodies the routes parse themselves (strict JSON, see ``json_body``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

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
