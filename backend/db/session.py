"""Engines and sessions. Built when a process starts (API lifespan, worker init, CLI), never at import."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psycopg
from sqlalchemy import Engine, create_engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import OperationalError as SAOperationalError
from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)
T = TypeVar("T")


def make_engine(url: str, **kw) -> Engine:
    """An engine whose pool pings each connection as it hands it out (pool_pre_ping; pass
    pool_pre_ping=False for one that does not, see Reader)."""
    kw.setdefault("pool_pre_ping", True)
    return create_engine(url, future=True, **kw)


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


class Reader:
    """Runs read-only units of work without a ping per request. A pinged checkout costs a round trip
    before any work (on a small read, as much as the read itself); instead the work starts on a
    connection from an unpinged pool (`fast`, autocommit: make_read_sessionmaker over an engine with
    pool_pre_ping=False), and if that connection turns out to be lost (the database restarted or dropped
    it since it was last used), the work runs once more on a pinged one (`checked`). Only work that
    never writes may run here, as it may run twice."""

    def __init__(self, fast: sessionmaker[Session], checked: sessionmaker[Session]) -> None:
        self.fast, self.checked = fast, checked

    def __call__(self, work: Callable[[Session], T]) -> T:
        session = self.fast()
        try:
            return work(session)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            log.warning("a pooled database connection was lost (%s); reading again on a checked one",
                        type(exc.orig).__name__)
        finally:
            session.close()
        session = self.checked()
        try:
            return work(session)
        finally:
            session.close()


@contextmanager
def driver(session: Session) -> Iterator[psycopg.Connection]:
    """The session's psycopg connection, for reads that bypass SQLAlchemy's execution (pipelines, binary
    results). A lost connection is invalidated in the pool and raised as SQLAlchemy raises its own
    (OperationalError, connection_invalidated), so the API answers 503 and Reader reads again."""
    sa_conn = session.connection()
    conn = sa_conn.connection.driver_connection
    try:
        yield conn
    except psycopg.OperationalError as exc:
        if not (conn.broken or conn.closed):
            raise
        sa_conn.invalidate(exc)
        raise SAOperationalError(None, None, exc, connection_invalidated=True) from exc
