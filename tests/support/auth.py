"""Credentials for tests that call the API: reads need a viewer token by default (settings.anonymous_read off).
A test about something else either carries a token made here or sets anonymous_read explicitly."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.orm import Session

from backend.api.auth import create_token
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
