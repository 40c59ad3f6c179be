from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.support.auth import app_on_session


@pytest.fixture
def client(db: Session, now: datetime) -> Iterator[TestClient]:
    """The app on the rollback-per-test session and a fixed clock (no lifespan: no engine of its own), called
    with a viewer token (reads need one; a test's own Authorization header wins; `anonymous` has none)."""
    yield app_on_session(db, now, token_role="viewer")


@pytest.fixture
def anonymous(client: TestClient) -> TestClient:
    """The same app, called without a credential."""
    return TestClient(client.app)
