"""Fixtures of the migration tests: an empty database of their own, the alembic config for it, and reading
and seeding it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date

import psycopg
import pytest
from sqlalchemy.orm import Session

from backend.db import rollups
from backend.db.session import make_engine, make_sessionmaker, session_scope
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


def rows(url: str, sql: str) -> list[tuple]:
    """The rows of one statement, on a connection of its own."""
    with psycopg.connect(dbsupport.libpq(url)) as conn:
        return conn.execute(sql).fetchall()


@contextmanager
def seeding(url: str, day: date) -> Iterator[Session]:
    """One transaction on `url`, committed at the end, with the partition of `day` made first."""
    engine = make_engine(url)
    try:
        with session_scope(make_sessionmaker(engine)) as s:
            rollups.ensure_partitions(s, {day})
            yield s
    finally:
        engine.dispose()
