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
