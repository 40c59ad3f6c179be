"""Shared fixtures: real PostgreSQL (migrated by alembic), real Redis, a fixed clock."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from backend.db.session import make_engine
from tests.support import db as dbsupport
from tests.support.deadline import deadline

pytest_plugins = ["tests.support.fixtures"]

# pytest-timeout per test (setup included), only against a hang: the pyproject default (600 s) for
# in-process tests; tests on real services (Prometheus, Celery, Chromium) wait on scrapes and beats and
# build module fixtures (a Prometheus, a seeded history) in their first test, so they get longer. Both
# scale with SPECWATCH_TEST_DEADLINE_SCALE; an explicit @pytest.mark.timeout or --timeout wins. `make test` keeps
# its own limit on the whole run (TEST_TIMEOUT).
SERVICE_MARKERS = ("e2e", "prometheus", "browser")
SERVICE_TIMEOUT = 1500
# a real engine's module fixture may first install vLLM or build llama-server (13-30 min on 2 cores); the make
# targets bound the whole run (ENGINE_TIMEOUT, LLAMACPP_TIMEOUT)
ENGINE_TIMEOUT = 3600


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("timeout", None) is not None:  # --timeout on the command line rules
        return
    base = config.getini("timeout")
    default = float(base) if base not in (None, "") else 600.0
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue
        slow = any(item.get_closest_marker(m) is not None for m in SERVICE_MARKERS)
        limit = ENGINE_TIMEOUT if item.get_closest_marker("engine") else SERVICE_TIMEOUT if slow else default
        item.add_marker(pytest.mark.timeout(deadline(limit)))


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    return dbsupport.admin_url()


@pytest.fixture(scope="session")
def pg_template(pg_admin_url: str) -> Iterator[str]:
    name = dbsupport.migrated_template(pg_admin_url)
    yield name
    dbsupport.drop_database(pg_admin_url, name)


@pytest.fixture(scope="session")
def engine(pg_admin_url: str, pg_template: str) -> Iterator[Engine]:
    """One migrated database for all rollback-per-test tests."""
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_s")
    eng = make_engine(url)
    yield eng
    eng.dispose()
    dbsupport.drop_database(pg_admin_url, name)


@pytest.fixture
def db(engine: Engine) -> Iterator[Session]:
    """A session inside a transaction that is rolled back after the test."""
    conn = engine.connect()
    trans = conn.begin()
    session = Session(bind=conn, join_transaction_mode="create_savepoint", expire_on_commit=False)
    try:
        yield session
    finally:
        session.close()
        trans.rollback()
        conn.close()


@pytest.fixture
def fresh_db_url(pg_admin_url: str, pg_template: str) -> Iterator[str]:
    """A migrated database of its own, for tests whose data other processes (worker, API) must see."""
    name, url = dbsupport.clone(pg_admin_url, pg_template)
    yield url
    dbsupport.drop_database(pg_admin_url, name)


@pytest.fixture(scope="session")
def redis_url(worker_id: str) -> str:
    """A Redis database of this pytest process's own: the Celery tests flush it and use it as their broker,
    so parallel workers (pytest -n, xdist's worker_id gw0, gw1, ...) must not share one. The default
    process (no xdist, worker_id "master") keeps database 15; worker gwN takes 15 - N - 1."""
    url = os.environ.get("SPECWATCH_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    if worker_id == "master":
        return url
    base, _, index = url.rpartition("/")
    own = int(index) - 1 - int(worker_id.removeprefix("gw"))
    if own < 0:
        raise RuntimeError(f"pytest worker {worker_id} has no Redis database below {url}: use fewer workers")
    return f"{base}/{own}"


@pytest.fixture
def now() -> datetime:
    return dbsupport.TEST_NOW
