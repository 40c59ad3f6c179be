"""`specwatch api` serves with the configured keep-alive: an idle connection stays open for
SPECWATCH_API_KEEPALIVE_SECONDS (uvicorn's own 5 s would be shorter than a load balancer's idle timeout),
then the server closes it."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from tests.support.deadline import deadline
from tests.support.procs import Proc, free_port, wait_for_http
from tests.support.stack import env_for

ROOT = Path(__file__).resolve().parents[2]


def _get(sock: socket.socket, port: int) -> bytes:
    sock.sendall(f"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    sock.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith(b"}"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """True if the server closes the idle connection within `seconds`."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False


def test_idle_connections_live_as_long_as_configured(fresh_db_url: str, tmp_path: Path) -> None:
    """Configured longer than uvicorn's 5 s: the connection outlives 6 s of idling (the setting applies),
    then the server closes it by itself (a deadline only against a hang). Load can only make the client
    see the close later, never earlier, so nothing here depends on the machine's speed."""
    port = free_port()
    env = env_for({"database_url": fresh_db_url, "api_keepalive_seconds": 15})
    proc = Proc("api", [sys.executable, "-m", "backend.cli", "api", "--host", "127.0.0.1", "--port", str(port)],
                tmp_path / "api.log", env=env, cwd=ROOT).start()
    try:
        wait_for_http(f"http://127.0.0.1:{port}/api/v1/health", proc=proc)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            assert b" 200 " in _get(sock, port).split(b"\r\n")[0] + b" "
            assert not _closed_within(sock, 6.0)  # uvicorn's default would have closed it at 5 s
            assert b" 200 " in _get(sock, port).split(b"\r\n")[0] + b" "  # still usable after 6 s idle
            assert _closed_within(sock, deadline(120)), "the idle connection was never closed"
    finally:
        proc.stop()


def test_the_access_log_is_a_setting(fresh_db_url: str, tmp_path: Path) -> None:
    """SPECWATCH_API_ACCESS_LOG: a line per request by default; none when false (the peer bench's API)."""
    lines = {}
    for on in (True, False):
        port = free_port()
        log = tmp_path / f"api-{on}.log"
        env = env_for({"database_url": fresh_db_url, "api_access_log": on})
        proc = Proc("api", [sys.executable, "-m", "backend.cli", "api", "--host", "127.0.0.1", "--port", str(port)],
                    log, env=env, cwd=ROOT).start()
        try:
            wait_for_http(f"http://127.0.0.1:{port}/api/v1/health", proc=proc)
            with socket.create_connection(("127.0.0.1", port)) as sock:
                assert b" 200 " in _get(sock, port).split(b"\r\n")[0] + b" "
        finally:
            proc.stop()
        lines[on] = [x for x in log.read_text().splitlines() if '"GET /api/v1/health HTTP/1.1" 200' in x]
    assert len(lines[True]) >= 2 and lines[False] == []  # wait_for_http's request and ours; then none
