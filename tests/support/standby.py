"""A real Postgres primary and its streaming replica, for the read-replica tests.

`start_pair()` makes a small primary of its own (`initdb`, `pg_ctl` on a free port, replication allowed
from 127.0.0.1) and a standby of it: `pg_basebackup -R -X stream` (the backup and the standby's
connection to the primary) into a temporary directory, started with `pg_ctl` on another free port. Both
run as the `postgres` user when the tests run as root (Postgres refuses to run as root). A primary of its
own rather than the shared test server: a base backup copies a whole cluster, and the shared one holds
every other test's and benchmark's databases (gigabytes); nor does the shared server need to allow
replication. Needs the server binaries (/usr/lib/postgresql/<version>/bin); without them (or if a server
does not start) it raises Unavailable with the reason, which the fixture turns into a skip."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from backend.engines.process import free_port
from tests.support.db import libpq
from tests.support.deadline import deadline


class Unavailable(Exception):
    """A standby cannot be made on this machine (the message says why)."""


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or ([shutil.which(name)] if shutil.which(name) else [])
    if not found:
        raise Unavailable(f"{name} not found (/usr/lib/postgresql/*/bin or PATH)")
    return found[-1]


@dataclass
class Server:
    """One Postgres cluster in a temporary directory, run with pg_ctl."""

    root: Path
    port: int
    as_user: list[str]

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [*self.as_user, _bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=deadline(120))

    def start(self) -> None:
        self._ctl("-w", "-t", str(int(deadline(60))), "start")

    def stop(self) -> None:
        self._ctl("-w", "-m", "fast", "stop", check=False)

    def sql(self, statement: str, database: str = "postgres"):
        with psycopg.connect(libpq(self.url(database)), autocommit=True) as conn:
            cur = conn.execute(statement)
            return cur.fetchone() if cur.description else None

    def wait_in_recovery(self) -> None:
        end = time.monotonic() + deadline(60)
        while True:
            try:
                if self.sql("SELECT pg_is_in_recovery()")[0]:
                    return
            except psycopg.OperationalError:
                pass
            if time.monotonic() > end:
                raise AssertionError(f"the standby did not come up in recovery: {self.log()[-2000:]}")
            time.sleep(0.2)

    def wait_for_database(self, name: str) -> None:
        """Until the standby has replayed the creation of database `name`."""
        end = time.monotonic() + deadline(120)
        while not self.sql(f"SELECT count(*) FROM pg_database WHERE datname = '{name}'")[0]:
            if time.monotonic() > end:
                raise AssertionError(f"database {name} never reached the standby")
            time.sleep(0.2)

    def log(self) -> str:
        path = self.root / "log"
        return path.read_text(errors="replace") if path.exists() else ""

    def remove(self) -> None:
        self._ctl("-w", "-m", "immediate", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)


HBA = "local all all trust\nhost all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n"


def _owned_dir(prefix: str, as_user: list[str]) -> Path:
    root = Path(tempfile.mkdtemp(prefix=prefix))
    if as_user:
        pg = pwd.getpwnam("postgres")
        os.chown(root, pg.pw_uid, pg.pw_gid)
    root.chmod(0o700)
    return root


def _configure(server: Server, extra: str) -> None:
    data = server.data
    (data / "postgresql.conf").write_text(
        f"port = {server.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{server.root}'\n"
        "max_connections = 60\nshared_buffers = 32MB\nfsync = off\nlogging_collector = off\n" + extra)
    (data / "pg_hba.conf").write_text(HBA)
    (data / "pg_ident.conf").write_text("")
    if server.as_user:
        pg = pwd.getpwnam("postgres")
        for name in ("postgresql.conf", "pg_hba.conf", "pg_ident.conf"):
            os.chown(data / name, pg.pw_uid, pg.pw_gid)


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=deadline(300), check=False)
    if done.returncode != 0:
        raise Unavailable(f"{what} failed: {(done.stderr or done.stdout).strip()[-400:]}")


def start_pair() -> tuple[Server, Server]:
    """(primary, standby), both started; the standby streams from the primary. The caller removes both."""
    as_user: list[str] = []
    if os.geteuid() == 0:  # Postgres will not run as root: the clusters belong to the postgres user
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            raise Unavailable("running as root and there is no postgres user to run Postgres as") from None
        as_user = ["runuser", "-u", "postgres", "--"]
    primary = Server(_owned_dir("specwatch-primary-", as_user), free_port(), as_user)
    standby = None
    try:
        _run([*as_user, _bin("initdb"), "-D", str(primary.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
              "--no-sync"], "initdb")
        _configure(primary, "wal_level = replica\nmax_wal_senders = 5\n")
        primary.start()
        standby = Server(_owned_dir("specwatch-standby-", as_user), free_port(), as_user)
        _run([*as_user, _bin("pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
              "-D", str(standby.data), "-R", "-X", "stream", "-c", "fast", "-w"], "pg_basebackup from the primary")
        _configure(standby, "hot_standby = on\nmax_standby_streaming_delay = -1\n")
        standby.start()
        standby.wait_in_recovery()
    except (Unavailable, subprocess.CalledProcessError, AssertionError) as exc:
        logs = f"primary log: {primary.log()[-800:]}" + (f" standby log: {standby.log()[-800:]}" if standby else "")
        for server in (standby, primary):
            if server is not None:
                server.remove()
        raise Unavailable(f"{exc}; {logs}") from exc
    return primary, standby
