"""The cached read endpoints' work (/summary, /capacity/fleet, /fleet's snapshots) through the response cache
(backend.api.cache).

Per request: the data version (backend.db.data_version.Versions: one read shared by the requests waiting
for it, without blocking the event loop), then the answer from the cache or
computed in a thread on the request's session. A computation first asks whether a write is in flight
(backend.db.data_version.writers_idle) and is kept only if none was. With the cache off (no entries) every
request computes, by the same code: the answers are the same."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import anyio.to_thread
import orjson
from sqlalchemy.orm import Session

from backend.api.cache import Computed, ResponseCache
from backend.config import Settings
from backend.db import data_version, queries, snapshots
from backend.db.pool_list import PoolRow
from backend.db.session import Reader
from backend.services import analytics, capacity, fleet
from backend.services.windows import Range


async def version(reader: Reader) -> int:
    return await reader.version()


def caches(reader: object) -> bool:
    """False with a read replica (backend.db.replica.RoutedReader): the data version counts the primary's
    writes, which a lagging standby may not show yet, so answers read there are computed per request and
    never kept (docs/api-cache.md)."""
    return hasattr(reader, "version")


async def _in_thread(session: Session, work: Callable[[Session], tuple[object, int]]) -> Computed:
    def run() -> Computed:
        idle = data_version.writers_idle(session)  # before the reads (see backend.db.data_version)
        value, size = work(session)
        return Computed(value, size, storable=idle)

    return await anyio.to_thread.run_sync(run)


async def _plain(session: Session, work: Callable[[Session], tuple[object, int]]) -> object:
    """Computed per request, never kept (a read replica)."""
    return (await anyio.to_thread.run_sync(lambda: work(session)))[0]


def _rows(pools: list) -> tuple[list[PoolRow], int]:
    rows = [PoolRow(p.id, p.model_name, p.traffic_class, p.spec_mode, p.num_spec_tokens, p.drafter,
                    p.vllm_version, p.first_seen, p.last_seen, p.origin, p.engine) for p in pools]
    return rows, 300 * len(rows)


def _pools(session: Session, model: str) -> tuple[list[PoolRow], int]:
    return _rows(analytics.model_pools(session, model))


async def summary_body(cache: ResponseCache, reader: Reader, session: Session, *, model: str,
                       rng: Range, now: datetime, settings: Settings) -> bytes:
    def compute(s: Session) -> tuple[tuple[dict, list[datetime | None]], int]:
        read = analytics.summary_of(s, pools=pools, model_name=model, rng=rng, now=now, settings=settings)
        body = read.model_dump(mode="json")
        return (body, [c.freshness.last_seen for c in read.classes]), len(orjson.dumps(body))

    if not caches(reader):
        pools = await _plain(session, lambda s: _pools(s, model))
        body, lasts = await _plain(session, compute)
        return orjson.dumps(analytics.summary_at(body, lasts, rng=rng, now=now, settings=settings))
    v = await version(reader)
    pools = await cache.get(("pools", model), v, lambda: _in_thread(session, lambda s: _pools(s, model)))
    key = ("summary", model, analytics.summary_key(pools, rng, settings))
    body, lasts = await cache.get(key, v, lambda: _in_thread(session, compute))
    return orjson.dumps(analytics.summary_at(body, lasts, rng=rng, now=now, settings=settings))


def _all_pools(session: Session) -> tuple[list[PoolRow], int]:
    return _rows(queries.list_pools(session))


async def capacity_fleet_body(cache: ResponseCache, reader: Reader, session: Session, *,
                              rng: Range, now: datetime, settings: Settings) -> bytes:
    """GET /capacity/fleet: computed once per data version and capacity.fleet_key (the pools, the buckets
    and hours the window covers, its time bins and length), then answered for each request's own instant
    (analytics.stamped: the window and generated_at are the only fields that depend on it)."""
    def compute(s: Session) -> tuple[dict, int]:
        body = capacity.fleet_capacity(s, rng=rng, now=now, settings=settings).model_dump(mode="json")
        return body, len(orjson.dumps(body))

    if not caches(reader):
        return orjson.dumps(await _plain(session, compute))
    v = await version(reader)
    pools = await cache.get(("pools", None), v, lambda: _in_thread(session, _all_pools))
    body = await cache.get(("capacity-fleet", capacity.fleet_key(pools, rng, settings)), v,
                           lambda: _in_thread(session, compute))
    return orjson.dumps(analytics.stamped(body, rng=rng, now=now))


async def fleet_snapshot(cache: ResponseCache, reader: Reader, session: Session, *,
                         window_seconds: int, now: datetime, settings: Settings) -> bytes | None:
    """The stored /fleet body of a standard window if fresh enough at `now` (fleet.snapshot_body), else None."""
    if window_seconds not in settings.fleet_snapshot_windows:
        return None

    def read(s: Session) -> tuple[tuple[datetime, bytes] | None, int]:
        snap = snapshots.get(s, window_seconds)
        return (None, 0) if snap is None else ((snap.generated_at, snap.body), len(snap.body))

    if not caches(reader):
        found = await _plain(session, read)
    else:
        found = await cache.get(("fleet-snapshot", window_seconds), await version(reader),
                                lambda: _in_thread(session, read))
    if found is None:
        return None
    return fleet.fresh_body(*found, window_seconds=window_seconds, now=now, settings=settings)
