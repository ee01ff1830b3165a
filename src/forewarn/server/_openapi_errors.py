"""The control API's error answers, written into its OpenAPI description once it is asked for.

Every route under ``/api/v1`` answers its errors as ``{"error": "..."}`` (``ErrorOut``) with one
of :data:`ERROR_STATUSES`. FastAPI can be told so route by route (``responses=``), but then it
builds a validating model field for each status of each route whenever an app is made, which
nothing but the description reads: two thirds of the CPU of making the control app and of its
first request (each ``forewarn serve`` makes one; tests make hundreds). The description gets the
same entries here instead, made when ``/openapi.json`` is first asked for.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

#: What a control API route may answer besides its success.
ERROR_STATUSES = (400, 404, 409, 413, 422)
#: FastAPI's own description of a 422, which the control API does not answer.
_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")


def describe_errors(app: FastAPI, prefix: str, model: type[BaseModel]) -> None:
    """Make ``app``'s OpenAPI description list ``model`` as the answer of each of
    :data:`ERROR_STATUSES` for every operation whose path starts with ``prefix``."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        _add_errors(schema, prefix, model)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _add_errors(schema: dict[str, Any], prefix: str, model: type[BaseModel]) -> None:
    reference = {"$ref": f"#/components/schemas/{model.__name__}"}
    described = False
    for path, operations in schema.get("paths", {}).items():
        if not path.startswith(prefix):
            continue
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for status in ERROR_STATUSES:
                responses.pop(str(status), None)  # FastAPI's own 422, replaced
                responses[str(status)] = {
                    "description": HTTPStatus(status).phrase,
                    "content": {"application/json": {"schema": reference}},
                }
            described = True
    if not described:
        return
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    schemas[model.__name__] = model.model_json_schema(ref_template="#/components/schemas/{model}")
    if not any(name in json.dumps(schema.get("paths", {})) for name in _VALIDATION_SCHEMAS):
        for name in _VALIDATION_SCHEMAS:
            schemas.pop(name, None)
    schema["components"]["schemas"] = dict(sorted(schemas.items()))


__all__ = ["ERROR_STATUSES", "describe_errors"]
