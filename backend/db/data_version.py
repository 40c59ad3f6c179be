"""The data version: a number that grows with every write to the tables the API's answers are read from.

A statement-level trigger on those tables (migration 2026_12_02_data_version) takes a shared transaction-level
advisory lock on LOCK_KEY and advances the sequence `specwatch_data_version`. So:
* `current()`: the value now; an answer computed from the data is valid while it has not changed;
* `writers_idle()`: no transaction that changed those tables is still open. The sequence advances when
  the write is made, the rows become visible when it commits: an answer read while a write is in flight
  may be missing rows under a version that already counts them, and must not be kept. Checked before the
  answer's reads (each statement of a read-committed transaction sees what was committed when it began).
A dropped partition fires no trigger: `bump()` after it.

`Versions` reads the version for the API without a round trip per request: concurrent requests share one
read, on an async connection (the event loop never waits for the database)."""

from __future__ import annotations

import asyncio

import psycopg
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import text
from sqlalchemy.exc import OperationalError as SAOperationalError
from sqlalchemy.orm import Session

from backend.db.session import Reads, driver

LOCK_KEY = 726_001_026  # the migration's trigger takes it, shared
SEQUENCE = "specwatch_data_version"
_CURRENT = f"SELECT last_value FROM {SEQUENCE}"
# free: no writer holds it shared; the exclusive lock is taken and released at once (CASE keeps the order)
_IDLE = f"SELECT CASE WHEN pg_try_advisory_lock({LOCK_KEY}) THEN pg_advisory_unlock({LOCK_KEY}) ELSE false END"


def _one(reads: Reads, sql: str):
    with driver(reads) as conn:
        return conn.execute(sql, prepare=True).fetchone()[0]


def current(reads: Reads) -> int:
    return int(_one(reads, _CURRENT))


def writers_idle(reads: Reads) -> bool:
    return bool(_one(reads, _IDLE))


def bump(session: Session) -> None:
    session.execute(text(f"SELECT nextval('{SEQUENCE}')"))


class Versions:
    """`await versions.current()`: the data version as read by a query that began after the call (so it
    counts every write committed before it). Calls made while a read is under way share the next one: one
    query per round trip however many requests wait. The reads run on one async connection kept by
    psycopg_pool's AsyncConnectionPool, which replaces it when lost. A failed read (the database down: after
    the pool's `timeout`) raises SQLAlchemy's OperationalError (503) to its callers."""

    def __init__(self, conninfo: str, *, timeout: float = 5.0) -> None:
        self.pool = AsyncConnectionPool(conninfo, kwargs={"autocommit": True}, min_size=1, max_size=1,
                                        timeout=timeout, open=False)
        self._running: asyncio.Future[int] | None = None
        self._next: asyncio.Future[int] | None = None

    async def current(self) -> int:
        if self._running is None:
            fut = self._running = asyncio.get_running_loop().create_future()
            asyncio.ensure_future(self._read(fut))
        else:
            if self._next is None:
                self._next = asyncio.get_running_loop().create_future()
            fut = self._next
        return await asyncio.shield(fut)

    async def _read(self, fut: asyncio.Future[int]) -> None:
        try:
            async with self.pool.connection() as conn:
                row = await (await conn.execute(_CURRENT, prepare=True)).fetchone()
            fut.set_result(int(row[0]))
        except Exception as exc:  # noqa: BLE001 - every caller gets it
            fut.set_exception(SAOperationalError(_CURRENT, None, exc) if isinstance(exc, psycopg.Error) else exc)
            fut.exception()  # retrieved: a caller that went away must not leave it unretrieved
        finally:
            nxt, self._next = self._next, None
            self._running = nxt
            if nxt is not None:
                asyncio.ensure_future(self._read(nxt))
