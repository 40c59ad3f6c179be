"""Credentials for tests that call the API: reads need a viewer token by default (settings.anonymous_read off).
A test about something else either carries a token made here or sets anonymous_read explicitly."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from backend.api.app import create_app
from backend.api.auth import create_token
from backend.api.deps import get_now, get_reader, get_session
from backend.config import Settings
from backend.db import data_version
from backend.db.session import make_engine


def token_in(session: Session, role: str = "viewer", name: str | None = None,
             now: datetime | None = None) -> str:
    """A new token of `role` in the session's database (not committed: the caller's transaction)."""
    return create_token(session, name=name or f"test {role}", role=role, by="test",
                        now=now or datetime.now(UTC))[1]


def make_token(db_url: str, role: str = "viewer", name: str | None = None) -> str:
    """A new token of `role`, committed in the database at `db_url` (for an API in another process)."""
    engine = make_engine(db_url)
    try:
        with Session(engine) as session, session.begin():
            return token_in(session, role, name)
    finally:
        engine.dispose()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class SessionReader:
    """The API's Reader over one given session (the test's): the work runs on it at once."""

    def __init__(self, session: Session) -> None:
        self.session = session

    async def run(self, work):
        return work(self.session)

    async def version(self) -> int:
        return data_version.current(self.session)


def app_on_session(db: Session, now: datetime, *, token_role: str | None = None, peer: str | None = None,
                   config: Settings | None = None, **settings) -> TestClient:
    """The API app on a test's (rollback-per-test) session and fixed clock, with no lifespan of its own:
    `config`, else `settings` as Settings fields; `token_role` sends a new token of that role with every call
    (none: no credential); `peer` is the client address (loopback counts as a trusted proxy in trusted-header
    mode)."""
    app = create_app(config or Settings(_env_file=None, **settings))

    def session() -> Iterator[Session]:
        yield db
        db.flush()

    app.dependency_overrides[get_session] = session
    app.dependency_overrides[get_reader] = lambda: SessionReader(db)
    app.dependency_overrides[get_now] = lambda: now
    headers = bearer(token_in(db, token_role, now=now)) if token_role else None
    return TestClient(app, headers=headers, client=(peer or "testclient", 50000))


def get_over(settings: Settings, path: str, model: str, start: float, end: float,
             now: datetime | None = None) -> dict:
    """GET /api/v1/`path` for `model` over [start, end] (unix seconds) from the app on `settings` (with its
    lifespan), as a viewer, the app's clock at `now` (default: `end`)."""
    app = create_app(settings)
    app.dependency_overrides[get_now] = lambda: now or datetime.fromtimestamp(end, UTC)
    with TestClient(app, headers=bearer(make_token(settings.database_url))) as client:
        return client.get(f"/api/v1/{path}", params={
            "model": model, "start": datetime.fromtimestamp(start, UTC).isoformat(),
            "end": datetime.fromtimestamp(end, UTC).isoformat()}).raise_for_status().json()
