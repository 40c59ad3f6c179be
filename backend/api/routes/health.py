"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from backend.schemas import HealthRead, ReadyRead, StandbyRead

router = APIRouter(tags=["health"])


def _head() -> str | None:
    from alembic.script import ScriptDirectory

    from backend.cli.serve import alembic_config

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


@router.get("/health", response_model=HealthRead, summary="Liveness")
def get_health() -> HealthRead:
    """The process is up (no dependency is checked)."""
    return HealthRead()


@router.get("/ready", response_model=ReadyRead, summary="Readiness: database reachable, migrations at head",
            responses={503: {"model": ReadyRead, "description": "Not ready"}})
def get_ready(request: Request):
    """200 when the database answers and its schema is at the newest migration; 503 otherwise. With a read
    replica configured, `replica` says whether it answers, its replication lag and where reads go (a
    standby that is down does not make the API unready: reads fall back to the primary)."""
    head = _head()
    route = getattr(request.app.state, "read_route", None)
    replica = None
    try:
        with request.app.state.engine.connect() as conn:
            current = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            if route is not None:
                replica = StandbyRead(**route.status(conn))
    except Exception as exc:  # noqa: BLE001 - any failure means not ready; the detail says which
        body = ReadyRead(status="not-ready", database=False, migration_head=head,
                         detail=f"database unreachable: {type(exc).__name__}")
        return JSONResponse(status_code=503, content=body.model_dump())
    if current != head:
        body = ReadyRead(status="not-ready", database=True, migration_current=current, migration_head=head,
                         detail="database schema is not at the newest migration (run `specwatch migrate`)",
                         replica=replica)
        return JSONResponse(status_code=503, content=body.model_dump(mode="json"))
    return ReadyRead(status="ready", database=True, migration_current=current, migration_head=head, replica=replica)
