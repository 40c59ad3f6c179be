"""One place mapping service errors to HTTP statuses: unknown names -> 404 (with the known ones),
bad parameters -> 422 (with a clear message), database unreachable -> 503."""

from __future__ import annotations

import math
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

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


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _request_invalid)
    app.add_exception_handler(NotFound, _not_found)
    app.add_exception_handler(InvalidParameter, _invalid)
    app.add_exception_handler(OperationalError, _db_down)
    app.add_exception_handler(PoolTimeout, _pool_exhausted)
    app.add_exception_handler(DataError, _bad_value)
    app.add_exception_handler(psycopg.DataError, _bad_value)
