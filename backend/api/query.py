"""Query parameters read straight from the request, for the series endpoints a dashboard calls on every
refresh. FastAPI validates each declared parameter on every request (~20 us apiece: ten optional strings
cost ~0.2 ms, 5-7 % of a fleet read such as the 7-day rolling acceptance of every pool, measured in one
process: 3.23 -> 3.01 ms). Here a parameter is declared once (`Param`); the same declaration documents it
in OpenAPI (`openapi`) and reads it (`read`) with FastAPI's rules: absent (or empty, for a repeated one)
gives the default, a repeated parameter is a list, the last of several values wins otherwise, unknown
parameters are ignored. A missing required parameter or a value outside `choices` is a 422 with a clear
message, like every other bad parameter (backend.api.errors)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import Request

from backend.services.errors import InvalidParameter


@dataclass(frozen=True)
class Param:
    """One query parameter: a string (or, repeated, a list of strings), optionally one of `choices` or of the
    form `pattern` (a regular expression the whole value matches: backend.schemas.common's patterns)."""

    name: str
    description: str
    default: str | None = None
    choices: tuple[str, ...] = ()
    repeated: bool = False
    required: bool = False
    pattern: str | None = None

    def schema(self) -> dict:
        one: dict = {"type": "string"} | ({"enum": list(self.choices)} if self.choices else {}) | (
            {"pattern": self.pattern} if self.pattern else {})
        if self.repeated:
            return {"anyOf": [{"type": "array", "items": one}, {"type": "null"}], "title": self.name.title()}
        if self.required:
            return one | {"title": self.name.title()}
        return {"anyOf": [one, {"type": "null"}], "title": self.name.title(), "default": self.default}


def openapi(params: Sequence[Param]) -> dict:
    """The parameters as an operation's OpenAPI `parameters` (for a route's `openapi_extra`)."""
    return {"parameters": [{"name": p.name, "in": "query", "required": p.required, "description": p.description,
                            "schema": p.schema()} for p in params]}


def read(request: Request, params: Sequence[Param]) -> dict[str, str | list[str] | None]:
    """The parameters' values by name (a repeated one as a list, or its default when absent)."""
    q = request.query_params
    out: dict[str, str | list[str] | None] = {}
    for p in params:
        value: str | list[str] | None = (q.getlist(p.name) or None) if p.repeated else q.get(p.name)
        if value is None:
            if p.required:
                raise InvalidParameter(f"query parameter {p.name!r} is required")
            value = p.default
        elif p.choices:
            bad = [v for v in (value if isinstance(value, list) else [value]) if v not in p.choices]
            if bad:
                raise InvalidParameter(f"{p.name} must be one of {', '.join(p.choices)} (got {bad[0]!r})")
        elif p.pattern:
            bad = [v for v in (value if isinstance(value, list) else [value]) if not re.fullmatch(p.pattern, v)]
            if bad:
                raise InvalidParameter(f"{p.name}={bad[0]!r}: not of the documented form. {p.description}")
        out[p.name] = value
    return out
