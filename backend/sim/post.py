"""Post the simulator's per-request records to specwatch (POST /api/v1/requests), as a gateway would.

Records wait in a bounded queue while the API is unreachable (the oldest are dropped past `max_pending`,
and counted); a failed batch is retried on the next round: the API is idempotent by request id."""

from __future__ import annotations

import collections
import logging
import threading

from backend.client.per_request import post_records
from backend.sim.server import Simulator

log = logging.getLogger("specwatch.sim.post")


class RequestPoster:
    def __init__(self, sim: Simulator, url: str, token: str, *, every: float = 5.0, batch: int = 1000,
                 max_pending: int = 100_000, timeout: float = 10.0):
        self.sim, self.url, self.token = sim, url, token
        self.every, self.batch, self.timeout = every, batch, timeout
        self.pending: collections.deque[dict] = collections.deque()
        self.max_pending = max_pending
        self.posted = self.dropped = self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def round(self) -> int:
        """Take the records finished since the last round and post what is pending; returns records posted."""
        self.pending.extend(self.sim.request_records())
        while len(self.pending) > self.max_pending:
            self.pending.popleft()
            self.dropped += 1
        done = 0
        while self.pending:
            chunk = [self.pending[i] for i in range(min(self.batch, len(self.pending)))]
            try:
                post_records(self.url, self.token, chunk, timeout=self.timeout)
            except OSError as exc:  # URLError, HTTPError, timeouts: keep them for the next round
                self.failures += 1
                log.warning("posting %d per-request records to %s failed: %s", len(chunk), self.url, exc)
                break
            for _ in chunk:
                self.pending.popleft()
            done += len(chunk)
        self.posted += done
        return done

    def start(self) -> RequestPoster:
        def loop() -> None:
            while not self._stop.wait(self.every):
                self.round()

        self._thread = threading.Thread(target=loop, name="sim-request-poster", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=self.timeout + 5)
