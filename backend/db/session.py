"""Engines and sessions. Built when a process starts (API lifespan, worker init, CLI), never at import."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.to_thread
import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout
from sqlalchemy import URL, Engine, create_engine, make_url, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import OperationalError as SAOperationalError
from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)
T = TypeVar("T")


MIGRATION_LOCK = "specwatch.migrate"


def lock_for_migrations(connection) -> None:
    """Wait for the transaction-scoped advisory lock of the migrations (PostgreSQL): concurrent
    `specwatch migrate` runs (an init container in every API pod) then run one after another, and each reads
    the schema version only once it holds the lock, so the later ones find it at head."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": MIGRATION_LOCK})


def make_engine(url: str, **kw) -> Engine:
    return create_engine(url, pool_pre_ping=True, future=True, **kw)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False)


TUNE = {"jit": "off", "work_mem": "64MB", "max_parallel_workers_per_gather": "0"}  # see tune
GENERIC_PLANS = {"plan_cache_mode": "force_generic_plan"}  # tune(generic_plans=True)


def tune_settings(*, generic_plans: bool = False) -> dict[str, str]:
    """The settings `tune` makes (also given at connect to the API's read connections, ReadPool)."""
    return TUNE | (GENERIC_PLANS if generic_plans else {})


def tune_sql(*, generic_plans: bool = False) -> str:
    """The statement `tune` runs (one SELECT of set_config calls, no parameters)."""
    return "SELECT " + ", ".join(f"set_config('{k}', '{v}', true)"
                                 for k, v in tune_settings(generic_plans=generic_plans).items())


def tune(session: Session, *, generic_plans: bool = False) -> None:
    """Per-transaction settings for analytic scans: no JIT and no parallel workers (compiling, or starting
    workers, costs 10-30 ms, more than these index-range aggregates take), and enough work_mem to
    hash-aggregate instead of sorting to disk. One statement, one round trip.

    generic_plans: prepared statements use their generic plan from the first execution on (Postgres would
    plan the first five executions of each one again, ~1.4 ms for a routed series read whose raw branch
    spans a month of partitions; the generic plan prunes partitions when it starts instead). For the
    statements `backend.db.spec_series.binary_rows` prepares (it sends this in the same round trip as its
    read): routed index-range reads whose plan does not depend on the range's length."""
    session.execute(text(tune_sql(generic_plans=generic_plans)))


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """The transaction boundary for tasks and scripts: commit on success, roll back on any error."""
    session = factory()
    ok = False
    try:
        yield session
        ok = True
    finally:
        end_session(session, ok=ok)


def end_session(session: Session, *, ok: bool) -> None:
    """End a unit of work: commit if it succeeded, else roll back; the session is closed either way (a
    commit that fails rolls back as it closes). session_scope and the API's request session both end here."""
    try:
        if ok:
            session.commit()
        else:
            session.rollback()
    finally:
        session.close()


@dataclass(slots=True)
class ReadConn:
    """A read-only unit of work's connection without SQLAlchemy (ReadPool): what the series reads need of
    a session, which is the psycopg connection (`driver`) and which database it is (`database`, the key of
    per-database caches such as backend.db.pool_list)."""

    conn: psycopg.Connection
    database: URL


Reads = Session | ReadConn  # what a read-only unit of work runs on


class ReadPool:
    """The API's read connections to one database: a psycopg_pool.ConnectionPool of autocommit connections
    (no BEGIN/COMMIT, no SQLAlchemy session or pool around them: together ~0.5 ms of a small read's ~4)
    that carry the analytic read settings (tune_settings) as startup options, not as a statement per read.

    `idle` connections are kept open (the library's min_size), at most `max_size` are out at once. A read
    waits up to `timeout` seconds for one (all busy, which the API's admission limit rules out, or the
    database down while the library keeps trying to connect in the background) and then fails with
    SQLAlchemy's OperationalError, which the API answers 503. The library closes a connection given back broken and opens another in its place."""

    def __init__(self, url: str, *, idle: int = 5, max_size: int = 15, timeout: float = 5.0,
                 **connect: object) -> None:
        self.database = make_url(url)
        self.conninfo = self.database.set(drivername="postgresql").render_as_string(hide_password=False)
        options = " ".join(f"-c {k}={v}" for k, v in tune_settings(generic_plans=True).items())
        self.pool = ConnectionPool(self.conninfo, kwargs={"autocommit": True, "options": options, **connect},
                                   min_size=idle, max_size=max_size, timeout=timeout, open=False)

    def open(self) -> None:
        self.pool.open()  # connects in the background: a database that is down does not stop the start

    @contextmanager
    def connection(self) -> Iterator[ReadConn]:
        try:
            with self.pool.connection() as conn:
                yield ReadConn(conn, self.database)
        except PoolTimeout as exc:
            raise SAOperationalError(None, None, exc) from exc

    def close(self) -> None:
        self.pool.close()


class Reader:
    """Runs read-only units of work on a ReadPool without a ping per checkout (a pinged checkout costs a
    round trip, on a small read as much as the read itself). If the connection turns out lost (the
    database restarted or dropped it since it was last used), the pool tests its idle connections
    (psycopg_pool's ConnectionPool.check, which replaces the lost ones) and the work runs once more. Only
    work that never writes may run here, as it may run twice. (The library's check-on-checkout instead
    pings every checkout and, meeting several lost connections in a row, waits 1, 2, 4 ... s between them.)

    `reader(work)` runs the work in the calling thread; `await reader.run(work)` in a worker thread.
    `versions` (backend.db.data_version.Versions) gives the data version without a thread."""

    def __init__(self, pool: ReadPool, versions: Any = None) -> None:
        self.pool, self.versions = pool, versions

    def __call__(self, work: Callable[[Reads], T]) -> T:
        try:
            with self.pool.connection() as conn:
                return work(conn)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            log.warning("a pooled database connection was lost (%s); reading again", type(exc.orig).__name__)
            self.pool.pool.check()
        with self.pool.connection() as conn:
            return work(conn)

    async def run(self, work: Callable[[Reads], T]) -> T:
        return await anyio.to_thread.run_sync(self, work)

    async def version(self) -> int:
        return await self.versions.current()


def database_of(reads: Reads) -> URL:
    """Which database a unit of work reads (the key of per-database caches)."""
    return reads.database if isinstance(reads, ReadConn) else reads.get_bind().engine.url


def is_tuned(reads: Reads) -> bool:
    """Whether the connection already runs with the analytic read settings (ReadPool's connections do)."""
    return isinstance(reads, ReadConn)


@contextmanager
def driver(reads: Reads) -> Iterator[psycopg.Connection]:
    """The psycopg connection of a session (or ReadConn), for reads that bypass SQLAlchemy's execution
    (pipelines, binary results). A lost connection is invalidated in the session's pool (a ReadConn's is
    discarded by its pool) and raised as SQLAlchemy raises its own (OperationalError,
    connection_invalidated), so the API answers 503 and Reader reads again."""
    if isinstance(reads, ReadConn):
        sa_conn, conn = None, reads.conn
    else:
        sa_conn = reads.connection()
        conn = sa_conn.connection.driver_connection
    try:
        yield conn
    except psycopg.OperationalError as exc:
        if not (conn.broken or conn.closed):
            raise
        if sa_conn is not None:
            sa_conn.invalidate(exc)
        raise SAOperationalError(None, None, exc, connection_invalidated=True) from exc
