"""One place mapping service errors to HTTP statuses: unknown names -> 404 (with the known ones),
bad parameters -> 422 (with a clear message), database unreachable -> 503."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError

from backend.services.errors import InvalidParameter, NotFound, UnknownModel


def _not_found(request: Request, exc: NotFound) -> JSONResponse:
    body = {"detail": exc.message}
    body["known_models" if isinstance(exc, UnknownModel) else "known"] = exc.known
    return JSONResponse(status_code=404, content=body)


def _invalid(request: Request, exc: InvalidParameter) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": str(exc)})


def _db_down(request: Request, exc: OperationalError) -> JSONResponse:
    return JSONResponse(status_code=503, content={"detail": "database unavailable"})


def install(app: FastAPI) -> None:
    app.add_exception_handler(NotFound, _not_found)
    app.add_exception_handler(InvalidParameter, _invalid)
    app.add_exception_handler(OperationalError, _db_down)
