"""One place mapping service errors to HTTP statuses: unknown names -> 404 (with the known ones),
bad parameters -> 422 (with a clear message), database unreachable -> 503; and a method the path does not
have -> 405 whose `Allow` lists every method the path has (Starlette lists only the first route's)."""

from __future__ import annotations

import math
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from backend.services.errors import InvalidParameter, NotFound, UnknownModel

_RETRY = {"Retry-After": "5"}


def _not_found(request: Request, exc: NotFound) -> JSONResponse:
    body: dict[str, Any] = {"detail": exc.message, "code": exc.code}
    body["known_models" if isinstance(exc, UnknownModel) else "known"] = exc.known
    return JSONResponse(status_code=404, content=body)


def _invalid(request: Request, exc: InvalidParameter) -> JSONResponse:
    body: dict[str, Any] = {"detail": str(exc), "code": exc.code}
    if exc.known is not None:
        body["known"] = exc.known
    return JSONResponse(status_code=422, content=body)


def _db_down(request: Request, exc: OperationalError) -> JSONResponse:
    return JSONResponse(status_code=503, content={"detail": "database unavailable"}, headers=_RETRY)


def _pool_exhausted(request: Request, exc: PoolTimeout) -> JSONResponse:
    return JSONResponse(status_code=503, content={"detail": "server busy: no database connection free"},
                        headers=_RETRY)


def _bad_value(request: Request, exc: Exception) -> JSONResponse:
    """A value the database cannot hold (a NUL character in a string, a number beyond its type): the
    request's fault, refused like any other bad parameter."""
    return JSONResponse(status_code=422, content={"detail": "invalid value: text with a NUL character or a number "
                                                            "out of range"})


def _finite(value: Any) -> Any:
    """The offending input echoed back as strict JSON: NaN / +-Infinity as their names, not as numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


async def _request_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's 422 body (`detail`: a list of {loc, msg, type, input}), whatever the input was."""
    return JSONResponse(status_code=422, content={"detail": _finite(jsonable_encoder(exc.errors()))})


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app fully matches for the request's path (asked of the router itself,
    so included routers, path converters and HEAD-with-GET count as they do when serving)."""
    routes = request.app.router.routes
    return [method for method in _METHODS
            if any(route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes)]


async def _http_error(request: Request, exc: StarletteHTTPException) -> Any:
    if exc.status_code == 405:
        exc.headers = {**(exc.headers or {}), "Allow": ", ".join(allowed_methods(request))}
    return await http_exception_handler(request, exc)


def install(app: FastAPI) -> None:
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _request_invalid)
    app.add_exception_handler(NotFound, _not_found)
    app.add_exception_handler(InvalidParameter, _invalid)
    app.add_exception_handler(OperationalError, _db_down)
    app.add_exception_handler(PoolTimeout, _pool_exhausted)
    app.add_exception_handler(DataError, _bad_value)
    app.add_exception_handler(psycopg.DataError, _bad_value)
