"""The peer bench's HTTP client (benchmarks.peer_queries.KeepAlive): one connection reused, reopened once
when the server closes it, form-encoded POSTs, and an error for any answer but 200."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from benchmarks.peer_queries import KeepAlive, _span


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple]] = []

    def _answer(self, status: int, body: bytes, *, close: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        if close:
            self.close_connection = True

    def do_GET(self) -> None:
        u = urlsplit(self.path)
        _Handler.seen.append(("GET", u.path, parse_qs(u.query), self.client_address[1]))
        if u.path == "/bad":
            self._answer(422, b'{"detail": "bad step"}')
        else:
            self._answer(200, b'{"ok": 1}', close=u.path == "/close")
            if u.path == "/drop":  # closes the connection without saying so, as an idle timeout does
                self.close_connection = True

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        _Handler.seen.append(("POST", self.path, parse_qs(body), self.client_address[1]))
        self._answer(200, b"posted")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    _Handler.seen = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_requests_share_one_connection_and_encode_their_parameters(server) -> None:
    c = KeepAlive(server)
    assert c.request("GET", "/a", {"step": "60s", "model": ["m1", "m2"]}) == b'{"ok": 1}'
    assert c.request("POST", "/api/v1/query", {"query": "sum(x) / 2", "time": 5}) == b"posted"
    (m1, p1, q1, port1), (m2, p2, q2, port2) = _Handler.seen
    assert (m1, p1, q1) == ("GET", "/a", {"step": ["60s"], "model": ["m1", "m2"]})
    assert (m2, p2, q2) == ("POST", "/api/v1/query", {"query": ["sum(x) / 2"], "time": ["5"]})
    assert port1 == port2  # the same client port: one connection
    c.close()


def test_a_closed_connection_is_reopened_and_an_error_status_raises(server) -> None:
    c = KeepAlive(server)
    assert c.request("GET", "/close", {}) == b'{"ok": 1}'
    assert c.request("GET", "/a", {}) == b'{"ok": 1}'  # the server closed the first connection
    assert _Handler.seen[0][3] != _Handler.seen[1][3]
    assert c.request("GET", "/drop", {}) == b'{"ok": 1}'
    time.sleep(0.2)
    assert c.request("GET", "/a", {}) == b'{"ok": 1}'  # sent on the dropped connection, then reopened
    assert _Handler.seen[-1][3] != _Handler.seen[-2][3]
    with pytest.raises(RuntimeError, match="HTTP 422.*bad step"):
        c.request("GET", "/bad", {})
    c.close()


@pytest.mark.parametrize(("seconds", "label"), [(30 * 86400, "30 d"), (8 * 86400, "8 d"), (6 * 3600, "6 h"),
                                                (36 * 3600, "36 h"), (5400, "1.5 h")])
def test_row_titles_name_the_window_actually_timed(seconds, label):
    """The bench's row titles said "30 d" whatever --days or --quick asked for."""
    assert _span(seconds) == label
