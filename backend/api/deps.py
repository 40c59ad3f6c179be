"""Request dependencies: the session (the transaction boundary), settings and an injectable clock.

FastAPI runs a plain `def` dependency in its thread pool, and a plain generator twice (entering and
leaving). The settings and the clock do no I/O and creating a session does none either, so they are
`async def` and run on the event loop; only the session's commit (or rollback) and release go to the
thread pool. A sync endpoint then costs two thread-pool hops instead of five: each hop is a thread
wake-up, which on an idle machine costs more than a small read's SQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated

import anyio
from fastapi import Depends, Path, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from backend.config import Settings
from backend.db.replica import RoutedReader
from backend.db.session import Reader, end_session


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_session(request: Request) -> AsyncIterator[Session]:
    """One session per request: commit on success, roll back on any error (backend.db.session.session_scope's
    rule). The end runs shielded from cancellation, so a client that disconnects never leaks a connection."""
    session = request.app.state.sessionmaker()
    ok = False
    try:
        yield session
        ok = True
    finally:
        if session.get_transaction() is None and not (session.new or session.dirty or session.deleted):
            session.close()  # never used (e.g. an answer from the response cache): nothing to end, no thread hop
        else:
            with anyio.CancelScope(shield=True):
                await run_in_threadpool(end_session, session, ok=ok)


async def get_read_session(request: Request,
                           primary: Annotated[Session, Depends(get_session, scope="function")]
                           ) -> AsyncIterator[Session]:
    """A read-only endpoint's session: on the read replica when one is configured and answers, else the
    primary's (`primary`, which then ends as get_session ends it; backend.db.replica.ReadRoute); the
    response says which (backend.api.read_headers). Never for an endpoint that writes: a standby refuses
    writes."""
    route = getattr(request.app.state, "read_route", None)
    if route is None:
        yield primary
        return
    session, note = await run_in_threadpool(route.session)
    request.state.reads = note
    if session is None:
        yield primary
        return
    ok = False
    try:
        yield session
        ok = True
    finally:
        with anyio.CancelScope(shield=True):
            await run_in_threadpool(end_session, session, ok=ok)


async def get_reader(request: Request) -> Reader | RoutedReader:
    """Runs an endpoint's read-only work (backend.db.session.Reader: plain autocommit connections, no BEGIN
    or COMMIT, no ping per request, read again if the first connection was lost). From an async endpoint,
    `await read.run(work)` runs it in a worker thread. With a read replica, the reads go to it while it
    answers (backend.db.replica.RoutedReader)."""
    route = getattr(request.app.state, "read_route", None)
    if route is None:
        return request.app.state.reader
    note = getattr(request.state, "reads", None)  # a read session of the same request noted it first: keep it
    if note is None:
        request.state.reads = note = {}
    return RoutedReader(route, note)


async def get_now() -> datetime:
    """The request's clock; tests override it (app.dependency_overrides[get_now])."""
    return datetime.now(UTC)


# scope="function": the session ends (commits) before the response is sent, so a failed commit is the
# request's error; FastAPI's default ends it after the response, when a 200 may already be on the wire
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
ReadSessionDep = Annotated[Session, Depends(get_read_session, scope="function")]
ReaderDep = Annotated[Reader, Depends(get_reader)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
NowDep = Annotated[datetime, Depends(get_now)]

# a row id: a Postgres bigint (a larger number could never name a row, and the database would refuse it)
MAX_ID = 2**63 - 1
PathId = Annotated[int, Path(ge=1, le=MAX_ID, description="Row id.")]
# the id of a table keyed by a Postgres integer (silences, channels, tokens)
MAX_INT_ID = 2**31 - 1
IntPathId = Annotated[int, Path(ge=1, le=MAX_INT_ID, description="Row id.")]
