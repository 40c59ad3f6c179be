"""The request session dependency (backend.api.deps.get_session) on a real database: the transaction
boundary of every endpoint. It commits on success, rolls back on any error, and always gives its
connection back to the pool, a failed request included."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import APIRouter, HTTPException
from fastapi.testclient import TestClient
from sqlalchemy import text

from backend.api.app import create_app
from backend.api.deps import SessionDep, SettingsDep
from backend.config import Settings
from tests.support.auth import bearer, make_token

router = APIRouter()


@router.post("/_t/add/{name}")
def add(name: str, session: SessionDep, settings: SettingsDep, fail: bool = False) -> dict:
    session.execute(text("INSERT INTO pools (model_name, traffic_class, spec_mode, first_seen, last_seen) "
                         "VALUES (:m, 'chat', 'eagle3', now(), now())"), {"m": name})
    if fail:
        raise HTTPException(status_code=409, detail="refused after the write")
    return {"baseline_mode": settings.baseline_mode}


@router.post("/_t/deferred")
def deferred(session: SessionDep) -> dict:
    """A write whose error only shows at COMMIT (a deferred unique constraint)."""
    session.execute(text("CREATE TEMP TABLE _t_deferred (x int UNIQUE DEFERRABLE INITIALLY DEFERRED) ON COMMIT DROP"))
    session.execute(text("INSERT INTO _t_deferred VALUES (1), (1)"))
    return {"stored": True}


@pytest.fixture
def app(fresh_db_url: str) -> Iterator:
    app = create_app(Settings(_env_file=None, database_url=fresh_db_url))
    app.include_router(router)
    with TestClient(app, raise_server_exceptions=False, headers=bearer(make_token(fresh_db_url))) as client:
        yield app, client


def _models(app) -> list[str]:
    with app.state.engine.connect() as conn:
        return list(conn.execute(text("SELECT model_name FROM pools ORDER BY 1")).scalars())


def test_a_request_commits_on_success_and_rolls_back_on_error(app) -> None:
    app, client = app
    r = client.post("/_t/add/kept")
    assert r.status_code == 200 and r.json() == {"baseline_mode": "off"}
    assert client.post("/_t/add/dropped", params={"fail": "true"}).status_code == 409
    assert _models(app) == ["kept"]
    assert app.state.engine.pool.checkedout() == 0  # both connections back in the pool


def test_a_failed_commit_is_the_response_not_a_success_already_sent(app) -> None:
    """The session ends before the response is sent (Depends(scope="function")): a commit that fails is a
    500 to the client. With FastAPI's default scope the commit ran after a 200 had gone out."""
    app, client = app
    r = client.post("/_t/deferred")
    assert r.status_code == 500, r.text
    assert app.state.engine.pool.checkedout() == 0


def _bulk(client, models: list[str] | None = None):
    return client.get("/api/v1/acceptance/bulk", params={"range": "1h", "fields": "acceptance_rate"}
                      | ({"model": models} if models else {}))


def _drop_other_connections(app) -> int:
    with app.state.engine.connect() as conn:
        return len(conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                                     "datname = current_database() AND pid <> pg_backend_pid()")).all())


def test_a_series_read_on_a_lost_connection_is_read_again(app, caplog) -> None:
    """The series endpoints take connections without a ping (backend.db.session.Reader); when the database
    has dropped the one they get, the pool tests its idle ones (psycopg_pool's check replaces the lost
    ones) and the read runs again: the client sees a 200, not a 503."""
    app, client = app
    client.post("/_t/add/m1")
    reader = app.state.reader
    first = _bulk(client)
    assert first.status_code == 200 and [s["model_name"] for s in first.json()["series"]] == ["m1"]
    series = first.json()["series"]
    reader.pool.pool.wait()  # all `idle` connections open
    assert _drop_other_connections(app) >= app.state.settings.api_read_pool_idle
    caplog.clear()
    again = _bulk(client)
    assert again.status_code == 200, again.text
    assert again.json()["series"] == series
    assert "connection was lost" in caplog.text
    caplog.clear()
    assert _bulk(client).json()["series"] == series and "lost" not in caplog.text  # the pool holds live ones


def test_a_reader_without_a_database_raises_what_the_api_answers_503_for(app) -> None:
    """Nothing listening: no connection comes within the pool's timeout, and the read fails (without
    running the work) with SQLAlchemy's OperationalError, which the API maps to 503; so does a request."""
    from sqlalchemy.exc import OperationalError

    from backend.api.errors import _db_down
    from backend.db.session import Reader, ReadPool

    app, client = app
    dead = ReadPool(app.state.engine.url.set(port=1).render_as_string(hide_password=False), timeout=0.3)
    dead.open()
    try:
        calls = []
        with pytest.raises(OperationalError):
            Reader(dead)(lambda s: calls.append(1))
        assert calls == []
        assert _db_down(None, OperationalError(None, None, Exception("x"))).status_code == 503
        app.state.reader = Reader(dead)
        r = _bulk(client)
        assert r.status_code == 503 and r.json() == {"detail": "database unavailable"}
    finally:
        dead.close()


def test_the_read_pool_keeps_its_connections_tuned_and_bounds_those_out(fresh_db_url: str) -> None:
    """ReadPool: connections carry the read settings from their start (no statement per read), in
    autocommit, and at most max_size are out at once: the next waits `timeout` and fails with the
    OperationalError the API answers 503 for."""
    from sqlalchemy.exc import OperationalError

    from backend.db.session import ReadPool, is_tuned

    pool = ReadPool(fresh_db_url, idle=1, max_size=2, timeout=0.2)
    pool.open()
    try:
        with pool.connection() as a, pool.connection() as b:
            assert a.conn is not b.conn and is_tuned(a) and a.conn.autocommit
            assert a.conn.execute("SELECT current_setting('jit'), current_setting('plan_cache_mode'), "
                                  "current_setting('work_mem')").fetchone() == ("off", "force_generic_plan", "64MB")
            with pytest.raises(OperationalError, match="couldn't get a connection"), pool.connection():
                pass
        with pool.connection() as c:
            assert c.conn in (a.conn, b.conn) and not c.conn.closed  # reused, not a new one
    finally:
        pool.close()


def test_the_series_pool_choice_is_checked_against_the_list_read_with_the_counters(app) -> None:
    """The bulk endpoint chooses its pools from the pool list this process read last and reads the list
    again with the counters; a pool added since is in the answer all the same."""
    app, client = app
    client.post("/_t/add/m1")
    assert [s["model_name"] for s in _bulk(client).json()["series"]] == ["m1"]
    client.post("/_t/add/m2")  # the remembered list now lacks m2
    assert [s["model_name"] for s in _bulk(client).json()["series"]] == ["m1", "m2"]
    assert [s["model_name"] for s in _bulk(client, ["m2"]).json()["series"]] == ["m2"]


def test_the_read_pool_keeps_no_more_idle_connections_than_it_may_open() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="api_read_pool_idle must be in 0 .. api_read_pool_max"):
        Settings(_env_file=None, api_read_pool_idle=16, api_read_pool_max=15)
    assert Settings(_env_file=None, api_read_pool_idle=0).api_read_pool_idle == 0
