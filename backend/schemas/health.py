"""Liveness and readiness (GET /health, GET /ready)."""

from typing import Literal

from pydantic import Field

from backend.schemas.common import Wire


class HealthRead(Wire):
    status: Literal["ok"] = "ok"


class StandbyRead(Wire):
    """The read replica (SPECWATCH_DATABASE_READ_URL) as /ready found it."""

    reachable: bool = Field(description="The standby answered now.")
    reads_from: Literal["standby", "primary"] = Field(description="Where the API's reads go now.")
    fallback: str | None = Field(default=None, description="Why reads are on the primary, when they are.")
    in_recovery: bool | None = Field(default=None, description="The standby is a replica (pg_is_in_recovery).")
    lag_seconds: float | None = Field(default=None, description=(
        "0 when the standby replayed all it received, else seconds since the last transaction it replayed "
        "committed on the primary; null when unknown."))
    lag_bytes: float | None = Field(default=None, description="WAL bytes the standby's replay is behind the primary.")
    replay_paused: bool | None = None
    detail: str | None = None


class ReadyRead(Wire):
    status: Literal["ready", "not-ready"]
    database: bool = Field(description="The database answered a query.")
    schema_state: Literal["up to date", "needs migrate", "newer than this specwatch"] | None = Field(
        default=None, description="The database schema against this version of specwatch (null when the "
                                  "database did not answer).")
    migrations_pending: int | None = Field(default=None, description="Migrations `specwatch migrate` would "
                                                                     "apply (0 when up to date).")
    detail: str | None = None
    replica: StandbyRead | None = Field(default=None, description="The read replica, when one is configured.")
