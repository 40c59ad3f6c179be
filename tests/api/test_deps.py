"""The request session dependency (backend.api.deps.get_session) on a real database: the transaction
boundary of every endpoint. It commits on success, rolls back on any error, and always gives its
connection back to the pool, a failed request included."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from fastapi import APIRouter, HTTPException
from fastapi.testclient import TestClient
from sqlalchemy import text

from backend.api.app import create_app
from backend.api.deps import SessionDep, SettingsDep
from backend.config import Settings
from tests.support.auth import bearer, make_token
from tests.support.db import libpq

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


def test_a_series_read_on_a_lost_connection_is_read_again_on_a_checked_one(app, caplog) -> None:
    """The series endpoints take connections without a ping (backend.db.session.Reader); when the database
    has dropped the one they get, the read runs again on a pinged connection: the client sees a 200, not
    a 503, and the lost connection leaves the pool. A small read on the event loop that fails so turns the
    loop path off for a while (`pause`); the read is done again in a thread."""
    app, client = app
    client.post("/_t/add/m1")
    reader = app.state.reader
    now = [1000.0]
    reader.clock = lambda: now[0]
    first = _bulk(client)  # in a thread: this process had not read the pool list yet
    assert first.status_code == 200 and [s["model_name"] for s in first.json()["series"]] == ["m1"]
    assert len(reader.fast._idle) == 1 and reader.inline._idle == []
    series = first.json()["series"]
    assert _bulk(client).json()["series"] == series and len(reader.inline._idle) == 1  # small: opens one
    inline_conn = reader.inline._idle[0]
    assert _bulk(client).json()["series"] == series and reader.inline._idle == [inline_conn]  # used on the loop
    assert _drop_other_connections(app) >= 2  # both pooled connections among them
    caplog.clear()
    again = _bulk(client)
    assert again.status_code == 200, again.text
    assert again.json()["series"] == series
    assert "a small read failed on an inline connection" in caplog.text  # then in a thread on the fast pool,
    assert "connection was lost" in caplog.text  # whose connection was dropped too: read on a checked one
    assert reader.inline._idle == [] and reader.inline_off_until == 1000.0 + reader.pause
    caplog.clear()
    assert _bulk(client).json()["series"] == series and "failed" not in caplog.text and "lost" not in caplog.text
    assert reader.inline._idle == [] and len(reader.fast._idle) == 1  # small reads go to threads meanwhile
    now[0] += reader.pause
    assert _bulk(client).json()["series"] == series and len(reader.inline._idle) == 1  # inline again
    inline_conn, fast_conn = reader.inline._idle[0], reader.fast._idle[0]
    reader.inline_cells = 59  # one pool x 60 one-minute grains (range=1h) is now too many: a thread
    assert _bulk(client).json()["series"] == series
    assert reader.inline._idle == [inline_conn] and reader.fast._idle == [fast_conn]
    inline_conn.close()  # would fail the read if it were taken: it is not
    assert _bulk(client).status_code == 200 and reader.inline._idle == [inline_conn]
    reader.inline_cells = 60  # at the bound: inline, on the closed connection, so read again in a thread
    assert _bulk(client).json()["series"] == series
    assert reader.inline._idle == [] and reader.inline_off_until == now[0] + reader.pause


def test_a_small_read_that_times_out_on_the_loop_is_done_again_in_a_thread(app, caplog) -> None:
    """The inline connections carry a statement timeout (SPECWATCH_API_INLINE_TIMEOUT_MS): a read that runs
    into it is done again in a thread without it, and the loop path pauses."""
    app, client = app
    client.post("/_t/add/m1")
    reader = app.state.reader
    expected = _bulk(client).json()["series"]
    _bulk(client)  # opens the inline connection
    assert len(reader.inline._idle) == 1
    reader.inline._idle[0].execute("SET statement_timeout = 100")
    locker = psycopg.connect(libpq(app.state.engine.url.render_as_string(hide_password=False)))
    locker.execute("LOCK TABLE pools IN ACCESS EXCLUSIVE MODE")  # the read waits for it: past its timeout
    release = threading.Timer(0.6, locker.rollback)
    release.start()
    try:
        caplog.clear()
        r = _bulk(client)
    finally:
        release.join()
        locker.close()
    assert r.status_code == 200 and r.json()["series"] == expected  # read in a thread once the lock went
    assert "QueryCanceled" in caplog.text and reader.inline._idle == []


def test_a_reader_without_a_database_raises_what_the_api_answers_503_for(app) -> None:
    """Nothing listening: the first connection fails at once (not a lost one, so no second try, and no
    wait) with SQLAlchemy's OperationalError, which the API maps to 503; so does a request."""
    from sqlalchemy.exc import OperationalError

    from backend.api.errors import _db_down
    from backend.db.session import Reader, ReadPool, make_engine, make_read_sessionmaker

    app, client = app
    dead_url = app.state.engine.url.set(port=1).render_as_string(hide_password=False)
    dead = make_engine(dead_url)
    calls = []
    with pytest.raises(OperationalError):
        Reader(ReadPool(dead_url, options={}), make_read_sessionmaker(dead))(lambda s: calls.append(1))
    assert calls == []
    assert _db_down(None, OperationalError(None, None, Exception("x"))).status_code == 503
    app.state.reader = Reader(ReadPool(dead_url, options={}), make_read_sessionmaker(dead))
    r = _bulk(client)
    assert r.status_code == 503 and r.json() == {"detail": "database unavailable"}


def test_the_read_pool_keeps_its_idle_connections_tuned_and_bounds_those_out(fresh_db_url: str) -> None:
    """ReadPool: connections carry the read settings from their start (no statement per read), go back for
    reuse when idle (at most `idle` kept), and at most max_size are out at once: the next waits `timeout`
    and fails with the OperationalError the API answers 503 for."""
    from sqlalchemy.exc import OperationalError

    from backend.db import queries
    from backend.db.session import ReadPool, is_tuned

    pool = ReadPool(fresh_db_url, options=queries.tune_settings(generic_plans=True), idle=1, max_size=2, timeout=0.2)
    try:
        with pool.connection() as a, pool.connection() as b:
            assert a.conn is not b.conn and is_tuned(a)
            assert not ReadPool(fresh_db_url, options={}).tuned  # settings not given at connect: sent per read
            assert a.conn.execute("SELECT current_setting('jit'), current_setting('plan_cache_mode'), "
                                  "current_setting('work_mem')").fetchone() == ("off", "force_generic_plan", "64MB")
            with pytest.raises(OperationalError, match="no read connection free"), pool.connection():
                pass
        assert pool._idle == [b.conn] and a.conn.closed  # b went back first and is kept; a is one too many
        with pool.connection() as c:
            assert c.conn is b.conn and not c.conn.closed  # reused, not a new one
            c.conn.execute("BEGIN")  # given back inside a transaction: closed, never reused
        assert c.conn.closed and pool._idle == []
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


def test_an_inline_read_without_a_timeout_is_refused_at_start() -> None:
    """api_inline_timeout_ms 0 would be Postgres's "no timeout": an unbounded wait on the event loop."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="api_inline_timeout_ms must be at least 1"):
        Settings(_env_file=None, api_inline_timeout_ms=0)
    assert Settings(_env_file=None, api_inline_timeout_ms=1).api_inline_timeout_ms == 1
