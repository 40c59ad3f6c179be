"""Engines and sessions. Built when a process starts (API lifespan, worker init, CLI), never at import."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker


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
