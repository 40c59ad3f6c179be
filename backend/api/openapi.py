"""The OpenAPI document says every status an operation can answer, with the body it then has.

FastAPI documents the success response and, for operations with parameters, a 422 whose `detail` is a list
of validation errors. The API also answers 422 with `detail` as one sentence (a bad window, an infeasible
input: backend.api.errors), 400 for a body that is not JSON, 401/403 on the alerting endpoints, 404 for an
unknown model or id, and 503 when busy or without a database. These are added here, to every operation
they apply to, so that a client generated from the document knows them (tests/api/test_schemathesis.py
holds the API to it).

The document is also as strict as the validation: every component it references is defined; the bearer
token is declared as the security scheme of the operations that need a caller; every string the API reads
(parameters and request bodies, dictionary keys and fields a model ignores included) carries NO_NUL_PATTERN
(backend.schemas.common) unless it has a stricter form, since the API refuses a NUL character anywhere in
its input (backend.api.limits.RefuseNul); a value of any type is a JsonValue (any JSON without NUL)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_flat_params
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel

from backend.schemas.alerts import RulesErrorRead
from backend.schemas.common import NO_NUL_PATTERN, ErrorRead

_ERROR = {"$ref": "#/components/schemas/ErrorRead"}
_VALIDATION = {"$ref": "#/components/schemas/HTTPValidationError"}
_VALIDATION_SCHEMAS = {
    "ValidationError": {"title": "ValidationError", "type": "object", "required": ["loc", "msg", "type"],
                        "properties": {"loc": {"title": "Location", "type": "array",
                                               "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
                                       "msg": {"title": "Message", "type": "string"},
                                       "type": {"title": "Error Type", "type": "string"}}},
    "HTTPValidationError": {"title": "HTTPValidationError", "type": "object", "properties": {
        "detail": {"title": "Detail", "type": "array", "items": {"$ref": "#/components/schemas/ValidationError"}}}},
}
# operations that validate alert rules answer 422 with {valid: false, errors: [...]} as `detail`
_RULES_422 = {("post", "/api/v1/alerts/rules/check"), ("put", "/api/v1/alerts/rules")}
_NOT_QUEUED = {"/api/v1/health"}
BEARER = "bearer"
_SECURITY_SCHEMES = {BEARER: {"type": "http", "scheme": "bearer", "description": (
    "An API token (`sw_...`, made with `specwatch token create` or POST /tokens), as "
    "`Authorization: Bearer <token>`. Behind an authenticating proxy (SPECWATCH_AUTH_MODE=trusted-header) the "
    "proxy's user header takes its place.")}}
# a string with one of these has a form of its own, stricter than "no NUL"
_FORMED = ("pattern", "enum", "const", "format")


def _add_model(schemas: dict, model: type[BaseModel]) -> None:
    """`model` and every model it refers to as components."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, sub in schema.pop("$defs", {}).items():
        schemas.setdefault(name, sub)
    schemas.setdefault(model.__name__, schema)


JSON_VALUE = "JsonValue"
_JSON_VALUE_REF = {"$ref": f"#/components/schemas/{JSON_VALUE}"}
_JSON_VALUE = {"title": JSON_VALUE, "description": "Any JSON value whose strings (keys too) hold no NUL character.",
               "anyOf": [{"type": "null"}, {"type": "boolean"}, {"type": "number"},
                         {"type": "string", "pattern": NO_NUL_PATTERN},
                         {"type": "array", "items": _JSON_VALUE_REF},
                         {"type": "object", "additionalProperties": _JSON_VALUE_REF,
                          "propertyNames": {"pattern": NO_NUL_PATTERN}}]}
_TYPED = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "not")


def _no_nul(schema: Any, schemas: dict, seen: set[str]) -> None:
    """Add NO_NUL_PATTERN to every free string `schema` accepts (following $refs into `schemas` once), and
    make every value of any type (`{}`, an object's `additionalProperties: true`) a JsonValue."""
    if isinstance(schema, list):
        for item in schema:
            _no_nul(item, schemas, seen)
        return
    if not isinstance(schema, dict):
        return
    if not any(k in schema for k in _TYPED):
        schema.update(_JSON_VALUE_REF)
        return
    if schema.get("additionalProperties", True) is True and (schema.get("type") == "object" or "properties" in schema):
        schema["additionalProperties"] = dict(_JSON_VALUE_REF)  # fields a model ignores: still no NUL in them
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        name = ref.rsplit("/", 1)[1]
        if name not in seen:
            seen.add(name)
            _no_nul(schemas.get(name), schemas, seen)
        return
    if schema.get("type") == "string" and not any(k in schema for k in _FORMED):
        schema["pattern"] = NO_NUL_PATTERN
    if schema.get("type") == "object" and "additionalProperties" in schema:
        schema.setdefault("propertyNames", {"pattern": NO_NUL_PATTERN})
    for key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf", "not"):
        if key in schema:
            _no_nul(schema[key], schemas, seen)
    for sub in (schema.get("properties") or {}).values():
        _no_nul(sub, schemas, seen)


def _json(schema: dict, description: str, **extra: Any) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}, **extra}


def _uses(dependant: Dependant, call: Callable) -> bool:
    return any(d.call is call or _uses(d, call) for d in dependant.dependencies)


def _takes(route: APIRoute, name: str) -> bool:
    fields = get_flat_params(route.dependant)
    if any(f.alias == name or f.name == name for f in fields):
        return True
    body = route.body_field
    return body is not None and name in getattr(body.field_info.annotation, "model_fields", {})


def install(app: FastAPI, routers: Sequence[tuple[str, APIRouter]], *, principal: Callable,
            raw_bodies: Sequence[str] = ()) -> None:
    """Replace app.openapi by one that adds the error responses to the routes of `routers` (each included
    under its prefix); computed once, like FastAPI's. `raw_bodies`: paths whose body the endpoint checks
    itself, record by record (RefuseNul's `body_exempt`): their body keeps the form the route gives it."""

    def openapi() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = doc.setdefault("components", {})
        schemas = components.setdefault("schemas", {})
        _add_model(schemas, ErrorRead)
        _add_model(schemas, RulesErrorRead)
        for name, schema in _VALIDATION_SCHEMAS.items():
            schemas.setdefault(name, schema)
        components.setdefault("securitySchemes", {}).update(_SECURITY_SCHEMES)
        schemas[JSON_VALUE] = _JSON_VALUE
        inputs: set[str] = set()
        for path, operations in doc["paths"].items():
            for op in operations.values():
                for parameter in op.get("parameters", []):
                    _no_nul(parameter.get("schema"), schemas, inputs)
                for media in (op.get("requestBody") or {}).get("content", {}).values():
                    if path not in raw_bodies:
                        _no_nul(media.get("schema"), schemas, inputs)
        for prefix, router in routers:
            for route in router.routes:
                if isinstance(route, APIRoute) and route.include_in_schema:
                    path = prefix + route.path_format
                    for method in route.methods:
                        op = doc["paths"].get(path, {}).get(method.lower())
                        if op is not None:
                            _document(route, path, method.lower(), op, principal)
        app.openapi_schema = doc
        return doc

    app.openapi = openapi  # type: ignore[method-assign]


def _document(route: APIRoute, path: str, method: str, op: dict, principal: Callable) -> None:
    responses = op["responses"]
    invalid = [_VALIDATION, _ERROR] + ([{"$ref": "#/components/schemas/RulesErrorRead"}]
                                       if (method, path) in _RULES_422 else [])
    takes_input = bool(get_flat_params(route.dependant) or route.body_field)
    if takes_input or "422" in responses:
        described = responses.get("422", {}).get("description")
        responses["422"] = _json({"anyOf": invalid}, described if described and described != "Validation Error"
                                 else "Invalid input: `detail` lists the fields, or says what is wrong")
    if route.body_field is not None:
        responses.setdefault("400", _json(_ERROR, "The body is not valid JSON"))
    if method in ("post", "put", "patch"):
        responses.setdefault("413", _json(_ERROR, "The request body is larger than the limit "
                                                  "(`SPECWATCH_API_MAX_BODY_BYTES`, or the endpoint's own)"))
    if _uses(route.dependant, principal):
        responses.setdefault("401", _json(_ERROR, "No or an invalid credential",
                                          headers={"WWW-Authenticate": {"schema": {"type": "string"}}}))
        responses.setdefault("403", _json(_ERROR, "The caller's role may not do this"))
    if route.dependant.path_params or _takes(route, "model"):
        responses.setdefault("404", _json(_ERROR, "Unknown model or id (`known_models` / `known` list the "
                                                  "existing ones)"))
    if "401" in responses:  # it asks for a credential (a route may document its 401 itself)
        op["security"] = [{BEARER: []}]
    if path not in _NOT_QUEUED:
        responses.setdefault("503", _json(_ERROR, "Busy (the request queue is full) or the database is "
                                                  "unavailable; retry after `Retry-After` seconds",
                                          headers={"Retry-After": {"schema": {"type": "integer"}}}))
