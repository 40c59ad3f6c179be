"""Request dependencies: the session (the transaction boundary), settings and an injectable clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db.session import session_scope


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """One session per request: commit on success, roll back on any error."""
    with session_scope(request.app.state.sessionmaker) as session:
        yield session


def get_now() -> datetime:
    """The request's clock; tests override it (app.dependency_overrides[get_now])."""
    return datetime.now(UTC)


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
NowDep = Annotated[datetime, Depends(get_now)]
