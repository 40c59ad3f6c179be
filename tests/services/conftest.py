from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from backend.config import Settings
from backend.services.windows import Range


@pytest.fixture
def settings() -> Settings:
    return Settings(_env_file=None)


@pytest.fixture
def hour(now: datetime) -> Range:
    return Range(now - timedelta(hours=1), now)
