"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from backend.db.revision_ids import RENAMED
from backend.schemas import HealthRead, ReadyRead, StandbyRead

router = APIRouter(tags=["health"])


def _schema(current: str | None) -> tuple[str, int | None]:
    """The schema's state in words and the migrations `specwatch migrate` would apply; never a migration id
    (they mean nothing to a user)."""
    from alembic.script import ScriptDirectory

    from backend.cli.serve import alembic_config

    scripts = ScriptDirectory.from_config(alembic_config())
    head = scripts.get_current_head()
    current = RENAMED.get(current, current)  # an id from before the rename: `specwatch migrate` rewrites it
    if current == head:
        return "up to date", 0
    known = {rev.revision for rev in scripts.walk_revisions()}
    if current is not None and current not in known:
        return "newer than this specwatch", None
    pending = sum(1 for _ in scripts.iterate_revisions(head, current or "base"))
    return "needs migrate", pending


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
    route = getattr(request.app.state, "read_route", None)
    replica = None
    try:
        with request.app.state.engine.connect() as conn:
            migrated = conn.execute(text("SELECT to_regclass('alembic_version')")).scalar() is not None
            current = conn.execute(text("SELECT version_num FROM alembic_version")).scalar() if migrated else None
            if route is not None:
                replica = StandbyRead(**route.status(conn))
    except Exception as exc:  # noqa: BLE001 - any failure means not ready; the detail says which
        body = ReadyRead(status="not-ready", database=False, detail=f"database unreachable: {type(exc).__name__}")
        return JSONResponse(status_code=503, content=body.model_dump())
    state, pending = _schema(current)
    if state != "up to date":
        detail = (f"the database schema needs {pending} migration(s): run `specwatch migrate`" if pending
                  else "the database schema was made by a newer specwatch: upgrade this one")
        body = ReadyRead(status="not-ready", database=True, schema_state=state, migrations_pending=pending,
                         detail=detail, replica=replica)
        return JSONResponse(status_code=503, content=body.model_dump(mode="json"))
    return ReadyRead(status="ready", database=True, schema_state=state, migrations_pending=0, replica=replica)
