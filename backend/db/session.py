"""Engines and sessions. Built when a process starts (API lifespan, worker init, CLI), never at import."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import anyio.to_thread
import psycopg
from psycopg.pq import TransactionStatus
from sqlalchemy import URL, Engine, create_engine, make_url, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import OperationalError as SAOperationalError
from sqlalchemy.orm import Session, sessionmaker

from backend.db.queries import tune_settings

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


def make_read_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions for units of work that only read: the connection is in autocommit, so no BEGIN and no
    COMMIT go to the server (two round trips of a small read's five). Each statement is its own
    transaction, which under READ COMMITTED (the default) is what statements of one transaction see
    too: each takes its own snapshot. A write through such a session would be committed at once, so
    only code that never writes may use one; a pipeline (spec_series.binary_rows) still runs as one
    implicit transaction up to its sync, so its SET LOCAL settings hold for its read."""
    return sessionmaker(bind=engine.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False)


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
    per-database caches such as backend.db.pool_list). `tuned`: the connection already runs with the
    analytic read settings (backend.db.queries.tune), so a read need not set them again."""

    conn: psycopg.Connection
    database: URL
    tuned: bool


Reads = Session | ReadConn  # what a read-only unit of work runs on


class ReadPool:
    """Plain psycopg connections for Reader: autocommit, no ping, no SQLAlchemy session or pool around them
    (together ~0.5 ms of a small read's ~4), and the analytic read settings given once per connection as
    startup options (`options`, e.g. {"jit": "off"}) instead of a statement per read.

    Up to `idle` connections stay open between requests, most recently used first; at most `max_size` are
    out at once (a read waits up to `timeout` seconds for one, then fails with OperationalError: 503). A
    connection is opened on demand, so a database that is down fails the read at once (503), and one that
    comes back needs no restart. A connection returned broken, or not idle, is closed, not kept."""

    def __init__(self, url: str, *, options: dict[str, str], idle: int = 5, max_size: int = 15,
                 timeout: float = 30.0, **connect: object) -> None:
        self.database = make_url(url)
        self.conninfo = self.database.set(drivername="postgresql").render_as_string(hide_password=False)
        self.options = " ".join(f"-c {k}={v}" for k, v in options.items())
        self.tuned = tune_settings(generic_plans=True).items() <= options.items()  # ReadConn.tuned
        self.connect_kw = connect  # more libpq parameters (e.g. keepalives)
        self.idle_max, self.timeout = idle, timeout
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_size)

    @contextmanager
    def connection(self) -> Iterator[ReadConn]:
        """A connection: an idle one, else a new one; waits up to `timeout` for a free slot."""
        with self._checkout(wait=True) as conn:
            yield conn

    @contextmanager
    def idle_connection(self) -> Iterator[ReadConn | None]:
        """An idle connection if one is there and a slot is free, else None; never waits, never connects."""
        with self._checkout(wait=False) as conn:
            yield conn

    @contextmanager
    def _checkout(self, *, wait: bool) -> Iterator[ReadConn | None]:
        if not (self._slots.acquire(timeout=self.timeout) if wait else self._slots.acquire(blocking=False)):
            if wait:
                raise SAOperationalError(None, None, TimeoutError(f"no read connection free in {self.timeout:g} s"))
            yield None
            return
        conn = None
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None and wait:
                try:
                    conn = psycopg.connect(self.conninfo, autocommit=True, options=self.options, **self.connect_kw)
                except psycopg.OperationalError as exc:
                    raise SAOperationalError(None, None, exc) from exc
            yield None if conn is None else ReadConn(conn, self.database, self.tuned)
        finally:
            if conn is not None:
                self._give_back(conn)
            self._slots.release()

    def _give_back(self, conn: psycopg.Connection) -> None:
        if not (conn.broken or conn.closed) and conn.info.transaction_status == TransactionStatus.IDLE:
            with self._lock:
                if len(self._idle) < self.idle_max:
                    self._idle.append(conn)
                    return
        conn.close()

    def discard_idle(self) -> None:
        """Close every idle connection (after one was found lost: the others likely are too)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self) -> None:
        self.discard_idle()


class Reader:
    """Runs read-only units of work without a ping per request. A pinged checkout costs a round trip
    before any work (on a small read, as much as the read itself); instead the work starts on a plain
    connection (ReadPool: autocommit, no ping), and if that connection turns out to be lost (the database
    restarted or dropped it since it was last used), the idle ones are dropped and the work runs once more
    on a pinged session (`checked`). Only work that never writes may run here, as it may run twice; it gets
    a Reads (a ReadConn, or a Session on the second try).

    `reader(work)` runs the work in the calling thread. `await reader.run(work, grains=n)` from the event
    loop runs it in a thread, except a small read (at most `inline_cells` pools x time grains, by the pool
    list this process read last), which runs on the loop itself (`inline`): a thread hop costs two thread
    wake-ups, ~0.3 ms of a ~5 ms read here. Such a read blocks the loop while it waits for the database, so
    its connections are bounded: they come from their own pool (`inline`, whose connections carry a
    statement timeout and TCP keepalives, see backend.api.app), only idle ones are taken (no connect, no
    wait on the loop), and the first database error there (timeout, lost connection) turns the inline
    path off for `pause` seconds; the read itself is then done again in a thread."""

    def __init__(self, fast: ReadPool, checked: sessionmaker[Session], *, inline: ReadPool | None = None,
                 inline_cells: int = 0, pause: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 versions: object | None = None) -> None:
        self.fast, self.checked, self.inline = fast, checked, inline
        self.versions = versions  # backend.db.data_version.Versions: `version()` without a thread
        self.inline_cells, self.pause, self.clock = inline_cells, pause, clock
        self.inline_off_until = float("-inf")

    def __call__(self, work: Callable[[Reads], T], pool: ReadPool | None = None) -> T:
        pool = pool or self.fast
        try:
            with pool.connection() as conn:
                return work(conn)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            log.warning("a pooled database connection was lost (%s); reading again on a checked one",
                        type(exc.orig).__name__)
            pool.discard_idle()
        session = self.checked()
        try:
            return work(session)
        finally:
            session.close()

    async def run(self, work: Callable[[Reads], T], *, grains: int) -> T:
        """Run `work` on the loop when it is small and an idle inline connection is there, else in a thread
        (a small read's thread opens the inline connection the next one will find idle)."""
        from backend.db.pool_list import known_count

        pools = known_count(self.fast.database)
        if (self.inline is None or pools is None or pools * grains > self.inline_cells
                or self.clock() < self.inline_off_until):
            return await anyio.to_thread.run_sync(self, work)
        try:
            with self.inline.idle_connection() as conn:
                if conn is not None:
                    return work(conn)
            return await anyio.to_thread.run_sync(self, work, self.inline)
        except (DBAPIError, psycopg.errors.QueryCanceled) as exc:
            if isinstance(exc, DBAPIError) and not exc.connection_invalidated:
                raise
            self.inline_off_until = self.clock() + self.pause
            self.inline.discard_idle()
            log.warning("a small read failed on an inline connection (%s); reads go to threads for %g s",
                        type(getattr(exc, "orig", exc)).__name__, self.pause)
        return await anyio.to_thread.run_sync(self, work)


    async def version(self) -> int:
        """The data version now (backend.db.data_version)."""
        from backend.db import data_version

        if self.versions is None:
            return await anyio.to_thread.run_sync(self, data_version.current)
        return await self.versions.current()


class SessionReader:
    """Reader.run over one given session (tests): the work runs on it at once."""

    def __init__(self, session: Session) -> None:
        self.session = session

    async def run(self, work: Callable[[Reads], T], *, grains: int) -> T:
        return work(self.session)

    async def version(self) -> int:
        from backend.db import data_version

        return data_version.current(self.session)


def database_of(reads: Reads) -> URL:
    """Which database a unit of work reads (the key of per-database caches)."""
    return reads.database if isinstance(reads, ReadConn) else reads.get_bind().engine.url


def is_tuned(reads: Reads) -> bool:
    """Whether the connection already runs with the analytic read settings (ReadPool's connections do)."""
    return isinstance(reads, ReadConn) and reads.tuned


@contextmanager
def driver(reads: Reads) -> Iterator[psycopg.Connection]:
    """The psycopg connection of a session (or ReadConn), for reads that bypass SQLAlchemy's execution
    (pipelines, binary results). A lost connection is invalidated in the session's pool (a ReadConn's is
    closed when it goes back) and raised as SQLAlchemy raises its own (OperationalError,
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
