"""Request admission: the API degrades (503 with Retry-After) instead of deadlocking when overloaded.

A sync endpoint holds a worker thread while it waits for a database connection, and its session is ended
(commit, release) in a second thread-pool hop. With more requests in flight than database connections,
threads waiting for a connection can hold every thread while the requests holding the connections wait
for a thread to release them: every request then times out. So at most `limit` requests run inside the
app at once (`limit` <= the database pool, 2 x `limit` <= the thread pool); up to `queue` more wait, each
at most `wait_seconds`; anything beyond is answered 503 with `Retry-After` at once. Liveness is never
queued (a busy API is alive)."""

from __future__ import annotations

import math

import anyio
import orjson
from starlette.types import ASGIApp, Receive, Scope, Send


class Admission:
    """ASGI middleware: a bounded number of requests in the app, a bounded queue in front of it."""

    def __init__(self, app: ASGIApp, *, limit: int, queue: int, wait_seconds: float, retry_after_seconds: float,
                 exempt: tuple[str, ...] = ()) -> None:
        self.app, self.limit, self.queue, self.wait_seconds = app, limit, queue, wait_seconds
        self.retry_after = str(max(1, math.ceil(retry_after_seconds)))
        self.exempt = frozenset(exempt)
        self.waiting = 0
        self.refused = 0
        self._slots: anyio.Semaphore | None = None  # made on the serving event loop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        if self._slots is None:
            self._slots = anyio.Semaphore(self.limit)
        slots = self._slots
        if slots.value == 0 and self.waiting >= self.queue:
            await self._busy(send, f"server busy: {self.limit} requests running and {self.waiting} waiting")
            return
        acquired = False
        self.waiting += 1
        try:
            with anyio.move_on_after(self.wait_seconds):
                await slots.acquire()
                acquired = True
        finally:
            self.waiting -= 1
        if not acquired:
            await self._busy(send, f"server busy: no request slot free within {self.wait_seconds:g} s")
            return
        try:
            await self.app(scope, receive, send)
        finally:
            slots.release()

    async def _busy(self, send: Send, detail: str) -> None:
        self.refused += 1
        body = orjson.dumps({"detail": detail})
        await send({"type": "http.response.start", "status": 503, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"retry-after", self.retry_after.encode()), (b"cache-control", b"no-store")]})
        await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware: a request body larger than its path's limit is refused with 413 before the app reads
    it all (a declared Content-Length at once; a chunked body as soon as the bytes read pass the limit), so
    no endpoint can be made to buffer an unbounded body. `limits` maps path prefixes to their own limit."""

    def __init__(self, app: ASGIApp, *, default: int, limits: dict[str, int] | None = None) -> None:
        self.app, self.default = app, default
        self.limits = sorted((limits or {}).items(), key=lambda kv: -len(kv[0]))

    def limit_for(self, path: str) -> int:
        return next((n for prefix, n in self.limits if path.startswith(prefix)), self.default)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _refuse(send, 400, "Content-Length is not a number")
                return
            if size > limit:
                await _refuse(send, 413, f"request body of {size} bytes; at most {limit}")
                return
        received, refused, started = 0, False, False

        async def limited_receive():
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    if not started:
                        await _refuse(send, 413, f"request body over {limit} bytes")
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message) -> None:
            nonlocal started
            if refused:
                return  # the refusal is the answer
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, limited_receive, guarded_send)


_NUL_ESCAPE = b"\\u0000"  # a NUL character inside a JSON string


def _nul_escape_at(data: bytes) -> int:
    """Index of the first JSON escape of a NUL character in `data` (`\u0000` after an even number of
    backslashes: an escaped backslash followed by "u0000" is text, not NUL), else -1."""
    at = data.find(_NUL_ESCAPE)
    while at >= 0:
        run = 0
        while at - run - 1 >= 0 and data[at - run - 1] == 0x5C:
            run += 1
        if run % 2 == 0:
            return at
        at = data.find(_NUL_ESCAPE, at + 1)
    return -1


class RefuseNul:
    """ASGI middleware: input holding a NUL character is refused with 422 (`code` invalid_parameter) before
    the app sees it: in the path, in the query string (`%00`) or in a string of a JSON body (`\\u0000`).
    No column can store one (Postgres refuses it) and the OpenAPI document declares every string the API
    reads free of it (backend.api.openapi), so it is refused the same everywhere, whether or not the value
    would reach the database. A body is read whole first (BodyLimit, outside, bounds it) and handed on as
    read. `body_exempt`: paths whose body is checked by the endpoint itself, record by record (POST /requests
    refuses a record with a NUL as `bad_text` and keeps the others)."""

    DETAIL = "invalid value: text with a NUL character"

    def __init__(self, app: ASGIApp, *, body_exempt: tuple[str, ...] = ()) -> None:
        self.app, self.body_exempt = app, frozenset(body_exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = scope.get("query_string") or b""
        if "\x00" in scope["path"] or b"%00" in query or b"\x00" in query:
            await _refuse(send, 422, self.DETAIL, code="invalid_parameter")
            return
        if scope["method"] in ("GET", "HEAD", "OPTIONS") or scope["path"] in self.body_exempt:
            await self.app(scope, receive, send)
            return
        messages: list[dict] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left (or BodyLimit refused the body and answered): nothing to do
            messages.append(message)
            if not message.get("more_body"):
                break
        if _nul_escape_at(b"".join(m.get("body", b"") for m in messages)) >= 0:
            await _refuse(send, 422, self.DETAIL, code="invalid_parameter")
            return

        async def replay():
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


async def _refuse(send: Send, status: int, detail: str, *, code: str | None = None) -> None:
    body = orjson.dumps({"detail": detail} | ({"code": code} if code else {}))
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
