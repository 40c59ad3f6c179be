"""The embedded servers really start, accept connections, stop, and keep their data across a restart."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from backend.embedded import (
    start_embedded_postgres,
    start_embedded_redis,
    stop_embedded_postgres,
    stop_embedded_redis,
)
from tests.support.db import libpq
from tests.support.deadline import deadline


@pytest.fixture
def own_dir() -> Iterator[Path]:
    """A directory outside pytest's base temp: as root the server runs as its own user, which needs search
    permission on every parent, and each pytest session (any other one on the machine too) resets
    /tmp/pytest-of-<user> to 0700 when it starts."""
    path = Path(tempfile.mkdtemp(prefix="specwatch-embedded-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_embedded_postgres_start_stop_restart_keeps_data(own_dir):
    data = own_dir / "pg"
    url = start_embedded_postgres(data)
    try:
        assert url.startswith("postgresql+psycopg://postgres@127.0.0.1:") and url.endswith("/specwatch")
        with psycopg.connect(libpq(url), autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            conn.execute("CREATE TABLE kept (v text)")
            conn.execute("INSERT INTO kept VALUES ('survives restart')")
        # a second start on a running data dir reuses the server
        assert start_embedded_postgres(data) == url
    finally:
        stop_embedded_postgres(data)
    _assert_refused(url)

    url2 = start_embedded_postgres(data)
    try:
        assert url2 == url, "the port stored in the data dir is reused while free"
        with psycopg.connect(libpq(url2)) as conn:
            assert conn.execute("SELECT v FROM kept").fetchone() == ("survives restart",)
    finally:
        stop_embedded_postgres(data)


def _assert_refused(url: str) -> None:
    try:
        psycopg.connect(libpq(url), connect_timeout=2).close()
    except psycopg.OperationalError:
        return
    raise AssertionError("postgres still accepts connections after stop")


def test_embedded_redis_start_stop_restart_keeps_data(tmp_path):
    data = tmp_path / "redis"
    url = start_embedded_redis(data)
    try:
        assert url.startswith("redis://127.0.0.1:") and url.endswith("/0")
        r = redis.Redis.from_url(url)
        assert r.ping()
        r.set("kept", "survives restart")
        # another process (as a Celery worker would) connects through kombu with the same URL
        code = ("import kombu,sys; c=kombu.Connection(sys.argv[1]); c.ensure_connection(max_retries=3); "
                "c.release(); print('ok')")
        out = subprocess.run([sys.executable, "-c", code, url], check=False, capture_output=True, text=True, timeout=deadline(300))
        assert out.returncode == 0 and "ok" in out.stdout, out.stderr
    finally:
        stop_embedded_redis(data)
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        raise AssertionError("redis still answers after stop")
    except redis.exceptions.ConnectionError:
        pass

    url2 = start_embedded_redis(data)
    try:
        assert url2 == url
        assert redis.Redis.from_url(url2).get("kept") == b"survives restart"
    finally:
        stop_embedded_redis(data)
