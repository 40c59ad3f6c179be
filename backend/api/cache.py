"""Response cache: answers of the read endpoints kept per API process, for as long as the data they were
computed from has not changed.

An entry is keyed by what was asked, normalised to what the answer's reads depend on (e.g. the buckets a
window covers, not the instant it ends), and holds only for the data version it was computed at
(backend.db.data_version: any write to the tables read moves it on) and at most `ttl` seconds. The
fields that depend on the instant of the request (a window's ends, `generated_at`, ages) are filled in
per request by the caller, so a cached answer is the answer computed afresh.

Bounded: at most `entries` entries and `max_bytes` bytes (least recently used go first); a newer data
version empties it. While an entry is being computed, requests for the same key and version wait for that
computation instead of repeating it (if it fails, each computes its own). An answer computed while a
write was in flight (`Computed.storable` false) is given to those waiting but not kept. Only answers that
are the same for every caller may go here: no endpoint whose answer depends on who asks."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

import anyio


@dataclass(frozen=True, slots=True)
class Computed:
    value: Any
    size: int  # bytes, roughly: what the entry counts against max_bytes
    storable: bool = True


@dataclass(slots=True)
class _Entry:
    value: Any
    size: int
    version: int
    at: float


class _Flight:
    __slots__ = ("done", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Computed | None = None


class ResponseCache:
    def __init__(self, *, entries: int, max_bytes: int, ttl: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries, self.max_bytes, self.ttl, self.clock = entries, max_bytes, ttl, clock
        self._items: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._flights: dict[tuple[Hashable, int], _Flight] = {}
        self.version: int | None = None
        self.bytes = 0
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    async def get(self, key: Hashable, version: int, compute: Callable[[], Awaitable[Computed]]) -> Any:
        """The value for `key` at data `version`: kept, being computed, or computed now (`compute`)."""
        if self.max_entries <= 0:
            return (await compute()).value
        if self.version is None or version > self.version:
            self.clear()
            self.version = version
        entry = self._items.get(key)
        if entry is not None and entry.version == version and self.clock() - entry.at <= self.ttl:
            self._items.move_to_end(key)
            self.hits += 1
            return entry.value
        self.misses += 1
        flight = self._flights.get((key, version))
        if flight is not None:
            await flight.done.wait()
            if flight.result is not None:
                return flight.result.value
            return (await compute()).value
        flight = self._flights[(key, version)] = _Flight()
        try:
            flight.result = result = await compute()
        finally:
            del self._flights[(key, version)]
            flight.done.set()
        if result.storable and version == self.version:
            self._put(key, _Entry(result.value, result.size, version, self.clock()))
        return result.value

    def _put(self, key: Hashable, entry: _Entry) -> None:
        if entry.size > self.max_bytes:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self.bytes -= old.size
        self._items[key] = entry
        self.bytes += entry.size
        while len(self._items) > self.max_entries or self.bytes > self.max_bytes:
            _, gone = self._items.popitem(last=False)
            self.bytes -= gone.size

    def clear(self) -> None:
        self._items.clear()
        self.bytes = 0
