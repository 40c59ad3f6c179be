from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from backend.api.app import create_app
from backend.api.deps import get_now, get_reader, get_session
from backend.config import Settings
from backend.db.session import SessionReader


@pytest.fixture
def client(db: Session, now: datetime) -> Iterator[TestClient]:
    """The app on the rollback-per-test session and a fixed clock (no lifespan: no engine of its own)."""
    app = create_app(Settings(_env_file=None))

    def session() -> Iterator[Session]:
        yield db
        db.flush()

    app.dependency_overrides[get_session] = session
    app.dependency_overrides[get_reader] = lambda: SessionReader(db)
    app.dependency_overrides[get_now] = lambda: now
    yield TestClient(app)
