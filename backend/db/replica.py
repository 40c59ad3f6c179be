"""Reads on a streaming replica (SPECWATCH_DATABASE_READ_URL), writes on the primary.

The API's read-only endpoints take their session or Reader from a ReadRoute: the standby's while it
answers, else the primary's. A read the standby cannot serve (refused connection, lost connection) marks
it down for `retry_seconds` and runs on the primary (a read-only unit of work may run twice); /ready
probes it too, and clears the mark when it answers again. Each request notes where its reads went
(`reads_from`: standby | primary, `fallback`: why not the standby), which backend.api.read_headers puts
in the response headers. Writes, migrations and the transactions of alerts and rollout never come here.

Replication lag is measured on the standby: 0 when everything it received is replayed, else the seconds
since the last transaction it replayed committed on the primary (pg_last_xact_replay_timestamp), so a
standby whose replay is paused or behind shows a growing lag. It is measured at most every
`lag_every_seconds` on a request's standby session (no extra connection) and at every /ready."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.to_thread
import psycopg
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import OperationalError as SAOperationalError
from sqlalchemy.orm import Session, sessionmaker

from backend.db.session import Reader, Reads

log = logging.getLogger(__name__)
T = TypeVar("T")

STANDBY_SQL = text("""
    SELECT pg_is_in_recovery() AS in_recovery,
           CASE WHEN NOT pg_is_in_recovery() THEN NULL
                WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0.0
                ELSE greatest(0.0, extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()))::float8
           END AS lag_seconds,
           pg_last_wal_replay_lsn()::text AS replay_lsn,
           CASE WHEN pg_is_in_recovery() THEN pg_is_wal_replay_paused() END AS replay_paused""")
BYTES_BEHIND_SQL = text("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), CAST(:lsn AS pg_lsn))::float8")


@dataclass(frozen=True)
class StandbyState:
    in_recovery: bool
    lag_seconds: float | None  # None: the standby replayed no transaction since it started (unknown)
    replay_lsn: str | None
    replay_paused: bool | None
    measured_at: float


def unreachable(exc: BaseException) -> bool:
    """Whether a database error means the standby cannot serve (not a query's own failure)."""
    orig = getattr(exc, "orig", exc)
    return isinstance(exc, SAOperationalError) and not isinstance(orig, psycopg.errors.QueryCanceled)


def measure(conn: Connection, clock: Callable[[], float]) -> StandbyState:
    row = conn.execute(STANDBY_SQL).one()
    return StandbyState(bool(row.in_recovery), row.lag_seconds, row.replay_lsn, row.replay_paused, clock())


class ReadRoute:
    """Where the API's reads go (see the module doc). Thread-safe enough: its state is a few attributes
    replaced whole."""

    def __init__(self, *, standby: sessionmaker[Session], primary_reader: Reader, standby_reader: Reader,
                 retry_seconds: float = 30.0, lag_every_seconds: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.standby = standby
        self.primary_reader, self.standby_reader = primary_reader, standby_reader
        self.retry_seconds, self.lag_every_seconds, self.clock = retry_seconds, lag_every_seconds, clock
        self.down_until = float("-inf")
        self.down_reason: str | None = None
        self.state: StandbyState | None = None

    # --- the standby's health
    def usable(self) -> bool:
        return self.clock() >= self.down_until

    def mark_down(self, exc: BaseException) -> None:
        orig = getattr(exc, "orig", None) or exc
        self.down_reason = f"standby unreachable ({type(orig).__name__}); reads on the primary"
        self.down_until = self.clock() + self.retry_seconds
        log.warning("read replica unreachable (%s): reads go to the primary for %g s", type(orig).__name__,
                    self.retry_seconds)

    def mark_up(self) -> None:
        if self.down_reason is not None:
            log.info("read replica answers again: reads go to it")
        self.down_until, self.down_reason = float("-inf"), None

    def fallback_reason(self) -> str:
        return self.down_reason or "standby unreachable; reads on the primary"

    # --- a request's session (blocking: call from a thread)
    def session(self) -> tuple[Session | None, dict[str, Any]]:
        """A standby session for a read-only request, or None (use the primary's), and the request's note
        ({"reads_from", "fallback", "lag_seconds"})."""
        if self.usable():
            session = self.standby()
            try:
                conn = session.connection()  # checkout (pinged): a standby that is down fails here
                if self.state is None or self.clock() - self.state.measured_at >= self.lag_every_seconds:
                    self.state = measure(conn, self.clock)
                return session, self.note("standby")
            except DBAPIError as exc:
                session.close()
                if not unreachable(exc):
                    raise
                self.mark_down(exc)
        return None, self.note("primary")

    def note(self, source: str) -> dict[str, Any]:
        if source == "standby":
            return {"reads_from": "standby", "fallback": None,
                    "lag_seconds": self.state.lag_seconds if self.state else None}
        return {"reads_from": "primary", "fallback": self.fallback_reason(), "lag_seconds": None}

    # --- Reader-style reads
    def read(self, work: Callable[[Reads], T], note: dict[str, Any]) -> T:
        if self.usable():
            try:
                out = self.standby_reader(work)
                note.update(self.note("standby"))
                return out
            except DBAPIError as exc:
                if not unreachable(exc):
                    raise
                self.mark_down(exc)
        note.update(self.note("primary"))
        return self.primary_reader(work)

    # --- /ready
    def status(self, primary_conn: Connection | None) -> dict[str, Any]:
        """The standby probed now: reachable, in recovery, lag (seconds, and bytes behind the primary's
        current WAL position when the primary answers), replay paused, where reads go. Probing clears or
        sets the down mark."""
        session = self.standby()
        try:
            state = self.state = measure(session.connection(), self.clock)
        except DBAPIError as exc:
            if unreachable(exc):
                self.mark_down(exc)
            orig = getattr(exc, "orig", None) or exc
            usable = self.usable()
            return {"reachable": False, "reads_from": "standby" if usable else "primary",
                    "fallback": None if usable else self.fallback_reason(),
                    "detail": f"the standby's probe failed ({type(orig).__name__})"
                              + ("" if usable else ": reads fall back to the primary")}
        finally:
            session.close()
        self.mark_up()
        behind = None
        if primary_conn is not None and state.replay_lsn is not None:
            behind = primary_conn.execute(BYTES_BEHIND_SQL, {"lsn": state.replay_lsn}).scalar()
        detail = None
        if not state.in_recovery:
            detail = "the read database is not in recovery: it is not a streaming replica of the primary"
        elif state.replay_paused:
            detail = "WAL replay is paused on the standby: its data grows older"
        return {"reachable": True, "reads_from": "standby", "fallback": None, "in_recovery": state.in_recovery,
                "lag_seconds": state.lag_seconds, "lag_bytes": behind, "replay_paused": state.replay_paused,
                "detail": detail}


class RoutedReader:
    """A request's Reader when a standby is configured: reads through the ReadRoute, noting where they went."""

    def __init__(self, route: ReadRoute, note: dict[str, Any]) -> None:
        self.route, self.note = route, note

    def __call__(self, work: Callable[[Reads], T]) -> T:
        return self.route.read(work, self.note)

    async def run(self, work: Callable[[Reads], T]) -> T:
        return await anyio.to_thread.run_sync(self, work)
