"""A local Slack-compatible HTTP receiver: records every POST and answers as Slack would, including the
failures a notifier must handle (rate limits, server errors, revoked tokens, archived channels).

`specwatch slack-receiver` (and `specwatch demo`) serve it as a channel you can look at: GET / renders the
messages received as Slack would show them (backend/sim/slack_page.py), GET /messages.json lists them.
The tests use it to program failures:

    with SlackReceiver() as slack:
        slack.fail_next("rate_limited", n=2, retry_after=1)   # the next 2 requests get 429 + Retry-After
        slack.fail_for("rollup_error", seconds=3)             # every request for 3 s gets 500
        slack.hang_next(n=1, seconds=3)                       # take the next request, answer 200 after 3 s
        slack.release()                                       # answer the held requests now
        ... post to slack.webhook_url (incoming webhook) or slack.url + "/api/chat.postMessage" ...
        slack.wait_for(1); slack.requests[0].json

Success: 200 with the body `ok` (incoming webhooks) or {"ok": true, ...} JSON under /api/ (Web API).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

# kind -> (HTTP status, Slack error string)
FAILURES: dict[str, tuple[int, str]] = {
    "rate_limited": (429, "rate_limited"),
    "rollup_error": (500, "rollup_error"),
    "channel_not_found": (404, "channel_not_found"),
    "invalid_token": (403, "invalid_token"),
    "channel_is_archived": (410, "channel_is_archived"),
    "gone": (410, "channel_is_archived"),
    "invalid_payload": (400, "invalid_payload"),
}
STATUS_KIND = {429: "rate_limited", 500: "rollup_error", 404: "channel_not_found", 403: "invalid_token",
               410: "channel_is_archived", 400: "invalid_payload"}


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what we answered
    at: float = field(default_factory=time.time)

    @property
    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class _Rule:
    kind: str
    remaining: int | None  # requests left, or None for a time window
    until: float | None
    retry_after: int


class SlackReceiver:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, keep: int = 1000):
        self.keep = keep  # requests kept (the oldest are dropped beyond it)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._rules: list[_Rule] = []
        self._hangs: list[float] = []  # seconds to wait before answering, one per coming request
        self._released = threading.Event()  # release(): every held request is answered now
        self.requests: list[Received] = []
        # stamps Received.at and times fail_for(); a test that drives the sender's clock sets the same one
        self.clock = time.time
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ---- lifecycle
    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def webhook_url(self) -> str:
        return f"{self.url}/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"

    def start(self) -> SlackReceiver:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="slack-receiver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- programming failures
    @staticmethod
    def _kind(kind: str | int) -> str:
        kind = STATUS_KIND.get(kind, kind) if isinstance(kind, int) else kind
        if kind not in FAILURES:
            raise ValueError(f"unknown failure {kind!r}; one of {sorted(FAILURES)} or {sorted(STATUS_KIND)}")
        return kind

    def fail_next(self, kind: str | int, n: int = 1, retry_after: int = 1) -> None:
        """Answer the next n requests with this failure (kind name or HTTP status)."""
        with self._lock:
            self._rules.append(_Rule(self._kind(kind), n, None, retry_after))

    def fail_for(self, kind: str | int, seconds: float, retry_after: int = 1) -> None:
        """Answer every request with this failure for the next `seconds`."""
        with self._lock:
            self._rules.append(_Rule(self._kind(kind), None, self.clock() + seconds, retry_after))

    def hang_next(self, n: int = 1, seconds: float = 5.0) -> None:
        """Accept the next n requests (they count as received, as Slack would post them) but answer only
        after `seconds`: a client with a shorter timeout cannot know they landed."""
        with self._lock:
            self._released.clear()
            self._hangs.extend([seconds] * n)

    def release(self) -> None:
        """Answer every request held by hang_next now, and hold none of the coming ones."""
        with self._lock:
            self._hangs.clear()
            self._released.set()

    def reset(self) -> None:
        with self._lock:
            self._hangs.clear()
            self._rules.clear()
            self.requests.clear()

    # ---- inspection
    def wait_for(self, n: int, timeout: float = 60) -> list[Received]:
        """Wait until at least n requests were received; return them all. `timeout` only catches a hang."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.requests) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"waited {timeout:g}s for {n} Slack requests; saw {len(self.requests)} "
                                       f"(statuses {[r.status for r in self.requests]})")
                self._cond.wait(left)
            return list(self.requests)

    @property
    def delivered(self) -> list[Received]:
        """Requests answered 200."""
        with self._lock:
            return [r for r in self.requests if r.status == 200]

    # ---- serving
    def _next_failure(self) -> _Rule | None:
        now = self.clock()
        self._rules = [r for r in self._rules if (r.remaining is None or r.remaining > 0)
                       and (r.until is None or r.until > now)]
        if not self._rules:
            return None
        rule = self._rules[0]
        if rule.remaining is not None:
            rule.remaining -= 1
        return rule

    def _handler_class(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with receiver._cond:
                    rule = receiver._next_failure()
                    status = FAILURES[rule.kind][0] if rule else 200
                    receiver.requests.append(Received(self.path, dict(self.headers.items()), body, status,
                                                      at=receiver.clock()))
                    del receiver.requests[:-receiver.keep]
                    receiver._cond.notify_all()
                    hang = receiver._hangs.pop(0) if receiver._hangs else 0.0
                if hang:
                    receiver._released.wait(hang)
                headers = {}
                if rule:
                    payload = json.dumps({"ok": False, "error": FAILURES[rule.kind][1]}).encode()
                    ctype = "application/json"
                    if status == 429:
                        headers["Retry-After"] = str(rule.retry_after)
                elif self.path.startswith("/api/"):
                    payload = json.dumps({"ok": True, "channel": "C0000000000", "ts": f"{time.time():.6f}"}).encode()
                    ctype = "application/json"
                else:
                    payload, ctype = b"ok", "text/plain"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                try:
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up waiting (hang_next)
                    self.close_connection = True

            def do_GET(self):
                from backend.sim.slack_page import messages_doc, render_page

                path = self.path.split("?", 1)[0]
                if path not in ("/", "/messages.json"):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with receiver._lock:
                    received = list(receiver.requests)
                if path == "/":
                    payload, ctype = render_page(received).encode(), "text/html; charset=utf-8"
                else:
                    payload, ctype = json.dumps(messages_doc(received)).encode(), "application/json"
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler
