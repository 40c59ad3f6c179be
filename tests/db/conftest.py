"""Fixtures of the migration tests: an empty database of their own, and the alembic config for it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from backend.schema_version import alembic_config
from tests.support import db as dbsupport


@pytest.fixture
def empty_db(pg_admin_url: str) -> Iterator[str]:
    name = f"specwatch_mig_{uuid.uuid4().hex[:10]}"
    url = dbsupport.create_database(pg_admin_url, name)
    yield url
    dbsupport.drop_database(pg_admin_url, name)


def cfg_for(url: str):
    cfg = alembic_config(url)
    cfg.attributes["configure_logger"] = False
    return cfg
