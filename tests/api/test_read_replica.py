"""Reads on a real streaming replica, writes on the primary (SPECWATCH_DATABASE_READ_URL).

A primary and its standby (tests/support/standby.py: initdb, pg_basebackup -R, pg_ctl) run for this
module; the API (its lifespan, engines and pools included) is built with database_url on the primary and
database_read_url on the standby. What is shown: a read endpoint answers from the standby (a pool written
on the primary while the standby's replay is paused is not in its answer, and is once replay resumes), a
write lands on the primary, /ready shows a lagging, paused standby, and with the standby stopped the API
still answers, from the primary, and says so (/ready, the response headers, /fleet's `reads`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from backend.api.app import create_app
from backend.api.auth import create_token
from backend.api.read_headers import with_reads
from backend.cli.serve import migrate
from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.schemas.common import ReadsRead
from tests.support.auth import bearer, make_token
from tests.support.db import libpq
from tests.support.deadline import deadline
from tests.support.standby import Server, Unavailable, start_pair

DB = "specwatch_replica"


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Server, Server]]:
    try:
        primary, standby = start_pair()
    except Unavailable as exc:
        pytest.skip(f"no streaming replica on this machine: {exc}")
    try:
        primary.sql(f"CREATE DATABASE {DB}")
        migrate(primary.url(DB))
        wait_replayed(primary, standby)
        yield primary, standby
    finally:
        standby.remove()
        primary.remove()


def wait_until(check, what: str, seconds: float = 60):
    end = time.monotonic() + deadline(seconds)
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.1)


def wait_replayed(primary: Server, standby: Server) -> None:
    """Until the standby has replayed everything the primary has written so far."""
    lsn = primary.sql("SELECT pg_current_wal_lsn()::text")[0]
    wait_until(lambda: standby.sql(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn")[0], "standby caught up")


@pytest.fixture
def client(pair) -> Iterator[TestClient]:
    primary, standby = pair
    app = create_app(Settings(_env_file=None, database_url=primary.url(DB), database_read_url=standby.url(DB),
                              database_read_retry_seconds=3600))
    with TestClient(app, headers=bearer(make_token(primary.url(DB)))) as c:
        yield c


def add_pool(primary: Server, model: str) -> None:
    primary.sql(f"INSERT INTO pools (model_name, traffic_class, spec_mode, first_seen, last_seen) "
                f"VALUES ('{model}', 'chat', 'eagle3', now(), now())", DB)


def pool_models(resp) -> set[str]:
    return {p["model_name"] for p in resp.json()["pools"]}


def test_reads_from_the_standby_writes_on_the_primary_and_lag_in_ready(pair, client):
    primary, standby = pair
    add_pool(primary, "replicated")
    wait_replayed(primary, standby)
    resp = client.get("/api/v1/pools")
    assert resp.status_code == 200
    assert resp.headers["x-specwatch-reads-from"] == "standby"
    assert "x-specwatch-read-fallback" not in resp.headers
    assert pool_models(resp) == {"replicated"}

    # replay paused: what the primary writes now is not on the standby, and the API's reads do not see it
    standby.sql("SELECT pg_wal_replay_pause()")
    wait_until(lambda: standby.sql("SELECT pg_get_wal_replay_pause_state()")[0] == "paused", "replay paused")
    add_pool(primary, "only-on-primary")
    assert primary.sql("SELECT count(*) FROM pools", DB)[0] == 2
    resp = client.get("/api/v1/pools")
    assert resp.headers["x-specwatch-reads-from"] == "standby"
    assert pool_models(resp) == {"replicated"}

    # /ready: the standby answers, is in recovery, paused, behind the primary in bytes and in seconds
    def lagging():
        body = client.get("/api/v1/ready").json()
        rep = body["replica"]
        return body if rep["lag_bytes"] and rep["lag_seconds"] else None

    body = wait_until(lagging, "a lag in /ready")
    assert body["status"] == "ready"
    rep = body["replica"]
    assert rep["reachable"] is True and rep["reads_from"] == "standby" and rep["fallback"] is None
    assert rep["in_recovery"] is True and rep["replay_paused"] is True
    assert rep["lag_bytes"] > 0 and rep["lag_seconds"] > 0
    assert "paused" in rep["detail"]

    # a write through the API goes to the primary (a standby refuses writes), not yet on the paused standby
    engine = make_engine(primary.url(DB))
    with session_scope(make_sessionmaker(engine)) as s:
        _, admin = create_token(s, name="admin", role="admin", by=None, now=datetime.now(UTC))
    engine.dispose()
    resp = client.post("/api/v1/tokens", json={"name": "via-api", "role": "viewer"},
                       headers={"Authorization": f"Bearer {admin}"})
    assert resp.status_code == 201, resp.text
    assert primary.sql("SELECT count(*) FROM api_tokens WHERE name = 'via-api'", DB)[0] == 1
    assert standby.sql("SELECT count(*) FROM api_tokens WHERE name = 'via-api'", DB)[0] == 0
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), psycopg.connect(libpq(standby.url(DB))) as conn:
        conn.execute("INSERT INTO pools (model_name, traffic_class, spec_mode, first_seen, last_seen) "
                     "VALUES ('x', 'x', 'x', now(), now())")

    # replay resumes: the standby catches up, the reads see the primary's pool and the write, lag 0
    standby.sql("SELECT pg_wal_replay_resume()")
    wait_replayed(primary, standby)
    resp = client.get("/api/v1/pools")
    assert resp.headers["x-specwatch-reads-from"] == "standby"
    assert pool_models(resp) == {"replicated", "only-on-primary"}
    assert standby.sql("SELECT count(*) FROM api_tokens WHERE name = 'via-api'", DB)[0] == 1
    rep = wait_until(lambda: (r := client.get("/api/v1/ready").json()["replica"])["lag_bytes"] == 0 and r,
                     "the standby caught up in /ready")
    assert rep["replay_paused"] is False and rep["lag_seconds"] == 0.0 and rep["detail"] is None


def test_standby_down_reads_fall_back_to_the_primary_and_say_so(pair, client):
    primary, standby = pair
    add_pool(primary, "written-before-the-stop")
    wait_replayed(primary, standby)
    assert client.get("/api/v1/pools").headers["x-specwatch-reads-from"] == "standby"
    fleet = client.get("/api/v1/fleet", params={"window": "1h", "live": "true"}).json()
    assert fleet["reads"]["reads_from"] == "standby" and fleet["reads"]["fallback"] is None

    standby.stop()
    add_pool(primary, "written-while-down")
    resp = client.get("/api/v1/pools")
    assert resp.status_code == 200
    assert resp.headers["x-specwatch-reads-from"] == "primary"
    assert "standby unreachable" in resp.headers["x-specwatch-read-fallback"]
    assert "written-while-down" in pool_models(resp)  # the primary's data
    fleet = client.get("/api/v1/fleet", params={"window": "1h", "live": "true"})
    assert fleet.status_code == 200
    assert fleet.json()["reads"]["reads_from"] == "primary"
    assert "standby unreachable" in fleet.json()["reads"]["fallback"]
    series = client.get("/api/v1/acceptance", params={"model": "written-while-down", "range": "1h"})
    assert series.status_code < 500 and series.headers["x-specwatch-reads-from"] == "primary"

    body = client.get("/api/v1/ready")
    assert body.status_code == 200 and body.json()["status"] == "ready"
    rep = body.json()["replica"]
    assert rep["reachable"] is False and rep["reads_from"] == "primary"
    assert "standby unreachable" in rep["fallback"] and rep["lag_seconds"] is None

    # back up: /ready probes it and reads return to it
    standby.start()
    standby.wait_in_recovery()
    wait_replayed(primary, standby)
    rep = client.get("/api/v1/ready").json()["replica"]
    assert rep["reachable"] is True and rep["reads_from"] == "standby"
    resp = client.get("/api/v1/pools")
    assert resp.headers["x-specwatch-reads-from"] == "standby"
    assert "written-while-down" in pool_models(resp)


@pytest.mark.parametrize("field, value", [("database_read_retry_seconds", -1),
                                          ("database_read_connect_timeout_seconds", 0),
                                          ("database_read_connect_timeout_seconds", 301)])
def test_read_replica_settings_are_bounded(field, value):
    with pytest.raises(ValidationError, match=field):
        Settings(_env_file=None, **{field: value})


def test_a_stored_fleet_body_gets_where_it_was_read():
    stored = json.dumps({"window": {"seconds": 3600}, "rows": []}).encode()
    reads = ReadsRead(reads_from="standby", lag_seconds=1.5)
    assert json.loads(with_reads(stored, reads)) == {
        "reads": {"reads_from": "standby", "lag_seconds": 1.5, "fallback": None}, "window": {"seconds": 3600},
        "rows": []}
    assert json.loads(with_reads(b"{}", reads)) == {"reads": reads.model_dump()}
    assert with_reads(stored, None) == stored
