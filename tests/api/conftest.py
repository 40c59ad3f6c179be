from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from backend.api.app import create_app
from backend.api.auth import create_token
from backend.api.deps import get_now, get_reader, get_session
from backend.config import Settings
from backend.db.session import SessionReader


@pytest.fixture
def client(db: Session, now: datetime) -> Iterator[TestClient]:
    """The app on the rollback-per-test session and a fixed clock (no lifespan: no engine of its own), called
    with a viewer token (reads need one; a test's own Authorization header wins; `anonymous` has none)."""
    app = create_app(Settings(_env_file=None))

    def session() -> Iterator[Session]:
        yield db
        db.flush()

    app.dependency_overrides[get_session] = session
    app.dependency_overrides[get_reader] = lambda: SessionReader(db)
    app.dependency_overrides[get_now] = lambda: now
    token = create_token(db, name="test viewer", role="viewer", by="test", now=now)[1]
    yield TestClient(app, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def anonymous(client: TestClient) -> TestClient:
    """The same app, called without a credential."""
    return TestClient(client.app)
