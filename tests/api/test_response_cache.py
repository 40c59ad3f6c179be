"""The response cache (backend.api.cache) on a real API: a kept answer is exactly the answer computed
afresh, a bucket finalized after it is in the next answer, an answer read while a write is in flight is not
kept; and the cache's own bounds, expiry and single flight."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta

import anyio
import anyio.lowlevel
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from backend.api.app import create_app
from backend.api.cache import Computed, ResponseCache
from backend.api.deps import get_now
from backend.config import Settings
from backend.db import repositories
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.services import analytics, fleet
from backend.services.windows import resolve_range
from tests.factories import ITL_BOUNDS, T0, make_bucket, make_pool
from tests.support.auth import bearer, make_token

N_LE = len(ITL_BOUNDS) + 1
ASK = {"model": "m", "window": "1h"}
FIRST = T0 + timedelta(minutes=1, seconds=10)  # inside the bucket after T0's: the same buckets for 50 s


@pytest.fixture
def served(fresh_db_url: str) -> Iterator[tuple]:
    """Committed data for model `m` (two spec classes and a baseline, histograms included) and the API
    with its lifespan (its own engine, read pools and version reader) on a clock the test moves."""
    engine = make_engine(fresh_db_url)
    factory = make_sessionmaker(engine)
    rnd = random.Random(26)
    with session_scope(factory) as s:
        pools = [make_pool(s, model_name="m", traffic_class="chat", last_seen=T0 - timedelta(hours=2)),
                 make_pool(s, model_name="m", traffic_class="code", last_seen=T0 - timedelta(hours=2)),
                 make_pool(s, model_name="m", traffic_class="chat", spec_mode="off", last_seen=T0 - timedelta(hours=2))]
        for i in range(50):
            start = T0 - timedelta(minutes=50 - i)
            for p in pools:
                spec = {} if p.spec_mode == "off" else {
                    "drafts": 100, "draft_tokens": 300, "accepted_tokens": 150 + rnd.randint(0, 100),
                    "accepted_per_pos": [90.0, 60.0, 30.0]}
                make_bucket(s, p, start, running_mean=4.0 + rnd.random(),
                            itl=[rnd.randint(0, 9) for _ in range(N_LE)], itl_sum=rnd.random() * 5,
                            tpot=[rnd.randint(0, 9) for _ in range(N_LE)], tpot_sum=rnd.random() * 5, **spec)
        chat_id = pools[0].id
    clock = {"now": FIRST}
    app = create_app(Settings(_env_file=None, database_url=fresh_db_url))
    app.dependency_overrides[get_now] = lambda: clock["now"]
    try:
        with TestClient(app, headers=bearer(make_token(fresh_db_url))) as client:
            yield client, app.state.cache, clock, factory, chat_id
    finally:
        engine.dispose()


def _bucket(pool_id: int, start, drafts: int) -> dict:
    row = dict.fromkeys(repositories.FACT_COLUMNS)
    row |= {"pool_id": pool_id, "bucket_start": start, "bucket_seconds": 60, "drafts": drafts,
            "draft_tokens": 3 * drafts, "accepted_tokens": drafts, "source": "prometheus",
            "collected_at": start + timedelta(minutes=2), "running_mean": 4.0}
    return row


def _drafts(body: dict, cls: str = "chat") -> int:
    return next(c for c in body["classes"] if c["traffic_class"] == cls)["volume"]["drafts"]


def test_a_kept_answer_is_the_answer_computed_afresh(served, fresh_db_url):
    client, cache, clock, factory, _ = served
    first = client.get("/api/v1/summary", params=ASK)
    assert first.status_code == 200 and cache.misses == 2 and cache.hits == 0  # the pool list, the summary
    later = FIRST + timedelta(seconds=40)  # the same bucket: kept
    clock["now"] = later
    kept = client.get("/api/v1/summary", params=ASK).json()
    assert cache.hits == 2 and cache.misses == 2
    assert kept != first.json()  # ... but answered for its own instant:
    assert kept["generated_at"] == "2026-11-30T11:01:50Z"
    assert kept["window"] == {"start": "2026-11-30T10:01:50Z", "end": "2026-11-30T11:01:50Z", "seconds": 3600.0}
    chat = next(c for c in kept["classes"] if c["traffic_class"] == "chat")
    assert chat["freshness"]["age_seconds"] == 60 + 50  # last_seen T0 (end of the last bucket) to 11:01:50
    assert chat["volume"]["drafts"] == 50 * 100 and chat["itl"]["quantiles"]

    # the same question to an API without a cache, and to the service itself, at the same instant
    off = create_app(Settings(_env_file=None, database_url=fresh_db_url, api_cache_entries=0))
    off.dependency_overrides[get_now] = lambda: later
    with TestClient(off, headers=bearer(make_token(fresh_db_url))) as fresh:
        assert fresh.get("/api/v1/summary", params=ASK).json() == kept
        assert off.state.cache.hits == 0
    settings = Settings(_env_file=None)
    rng = resolve_range(now=later, window="1h", start=None, end=None, default_seconds=3600,
                        max_seconds=settings.max_range_seconds)
    with session_scope(factory) as s:
        assert analytics.summary(s, model_name="m", rng=rng, now=later, settings=settings).model_dump(mode="json") == kept


def test_a_finalized_bucket_is_in_the_next_answer(served):
    client, cache, clock, factory, chat_id = served
    assert _drafts(client.get("/api/v1/summary", params=ASK).json()) == 5000
    assert _drafts(client.get("/api/v1/summary", params=ASK).json()) == 5000
    assert cache.hits == 2
    with session_scope(factory) as s:  # the collection's write path, committed
        repositories.upsert_buckets(s, [_bucket(chat_id, T0, 777)])
    after = client.get("/api/v1/summary", params=ASK).json()
    assert _drafts(after) == 5777 and _drafts(after, "mixed") == 10777
    assert cache.hits == 2  # nothing was served from before the write

    settings = Settings(_env_file=None)
    with session_scope(factory) as s:
        fleet.refresh_snapshots(s, now=clock["now"] - timedelta(seconds=5), settings=settings, force=True)
    one = client.get("/api/v1/fleet", params={"window": "1h"}).json()
    assert client.get("/api/v1/fleet", params={"window": "1h"}).json() == one
    with session_scope(factory) as s:  # a newer snapshot lands: the next /fleet is it
        fleet.refresh_snapshots(s, now=clock["now"], settings=settings, force=True)
    assert client.get("/api/v1/fleet", params={"window": "1h"}).json()["generated_at"] == "2026-11-30T11:01:10Z"
    assert one["generated_at"] == "2026-11-30T11:01:05Z"


def test_an_answer_read_while_a_write_is_in_flight_is_not_kept(served):
    client, cache, _, factory, chat_id = served
    with session_scope(factory) as s:
        repositories.upsert_buckets(s, [_bucket(chat_id, T0, 500)])  # advances the version, not yet visible
        assert _drafts(client.get("/api/v1/summary", params=ASK).json()) == 5000
        assert len(cache) == 0  # answered, not kept: it may miss rows its version counts
    assert _drafts(client.get("/api/v1/summary", params=ASK).json()) == 5500
    assert len(cache) == 2 and cache.hits == 0


def test_an_unknown_model_is_404_with_a_cache(served):
    client, *_ = served
    r = client.get("/api/v1/summary", params={"model": "nope", "window": "1h"})
    assert r.status_code == 404 and "m" in r.json()["detail"]


# --- the cache alone ------------------------------------------------------------------------------------


def _compute(value, size=10, calls=None, storable=True):
    async def run():
        if calls is not None:
            calls.append(value)
        await anyio.lowlevel.checkpoint()
        return Computed(value, size, storable)

    return run


def test_bounds_expiry_and_versions():
    t = {"now": 0.0}
    cache = ResponseCache(entries=2, max_bytes=100, ttl=30, clock=lambda: t["now"])

    async def main():
        calls = []
        assert await cache.get("a", 1, _compute("A", calls=calls)) == "A"
        assert await cache.get("a", 1, _compute("A2", calls=calls)) == "A"  # kept
        await cache.get("b", 1, _compute("B"))
        await cache.get("c", 1, _compute("C"))  # three entries: a (least recently used) goes
        assert len(cache) == 2 and await cache.get("a", 1, _compute("A3")) == "A3"
        await cache.get("big", 1, _compute("X", size=101))  # larger than max_bytes: never kept
        assert await cache.get("big", 1, _compute("X2", size=101)) == "X2"
        await cache.get("d", 1, _compute("D", size=95))  # bytes: only d fits
        assert len(cache) == 1 and cache.bytes == 95
        t["now"] = 31.0  # past the TTL
        assert await cache.get("d", 1, _compute("D2")) == "D2"
        assert await cache.get("d", 2, _compute("D3")) == "D3"  # a newer version empties the cache
        assert len(cache) == 1 and await cache.get("d", 2, _compute("D4")) == "D3"
        assert await cache.get("n", 2, _compute("N", storable=False)) == "N"  # not storable: computed again
        assert await cache.get("n", 2, _compute("N2")) == "N2"

    anyio.run(main)


def test_concurrent_requests_share_one_computation():
    cache = ResponseCache(entries=8, max_bytes=1000, ttl=30)
    calls, got = [], []

    async def slow():
        calls.append(1)
        await anyio.sleep(0.05)
        return Computed("V", 1)

    followers = anyio.Event()  # set once the three followers asked: the leader fails only after that

    async def failing():
        calls.append(1)
        await followers.wait()
        raise RuntimeError("boom")

    async def ask(compute, key="k"):
        try:
            got.append(await cache.get(key, 1, compute))
        except RuntimeError:
            got.append("error")

    asked = []

    async def follow(key):
        # cache.get reaches its wait on the leader's flight without yielding, so by the time the leader
        # runs again (it resumes only after this task yields) every follower is waiting on it
        asked.append(key)
        if len(asked) == 3:
            followers.set()
        await ask(slow, key)

    async def main():
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(ask, slow)
        assert calls == [1] and got == ["V"] * 5
        calls.clear(), got.clear()
        async with anyio.create_task_group() as tg:  # the leader fails: each other request computes its own
            tg.start_soon(ask, failing, "j")
            await anyio.sleep(0.01)
            for _ in range(3):
                tg.start_soon(follow, "j")
        assert got.count("error") == 1 and got.count("V") == 3 and len(calls) == 4

    anyio.run(main)


def test_an_api_without_entries_computes_every_time():
    cache = ResponseCache(entries=0, max_bytes=1000, ttl=30)
    calls = []

    async def main():
        for _ in range(3):
            await cache.get("k", 1, _compute("V", calls=calls))

    anyio.run(main)
    assert len(calls) == 3 and len(cache) == 0


def test_capacity_fleet_is_kept_per_data_version_and_answered_for_its_instant(served, fresh_db_url):
    """/capacity/fleet (the overview's saving column) through the cache: a kept answer is the one an API
    without a cache computes at the same instant; a finalized bucket is in the next answer."""
    client, cache, clock, factory, chat_id = served
    with session_scope(factory) as s:  # output tokens in every bucket (throughput: the capacity rows)
        s.execute(text("UPDATE pool_buckets SET generation_tokens = 6000 + 10 * pool_id + "
                       "extract(minute FROM bucket_start)"))
    first = client.get("/api/v1/capacity/fleet", params={"window": "1h"})
    assert first.status_code == 200 and cache.misses == 2  # the pool list, the answer
    later = FIRST + timedelta(seconds=40)
    clock["now"] = later
    kept = client.get("/api/v1/capacity/fleet", params={"window": "1h"}).json()
    assert cache.hits == 2 and cache.misses == 2 and len(kept["rows"]) == 2  # chat and code
    assert kept["generated_at"] == "2026-11-30T11:01:50Z" and kept["window"]["end"] == "2026-11-30T11:01:50Z"
    assert {k: v for k, v in kept.items() if k not in ("generated_at", "window")} == \
        {k: v for k, v in first.json().items() if k not in ("generated_at", "window")}
    off = create_app(Settings(_env_file=None, database_url=fresh_db_url, api_cache_entries=0))
    off.dependency_overrides[get_now] = lambda: later
    with TestClient(off, headers=bearer(make_token(fresh_db_url))) as fresh:
        assert fresh.get("/api/v1/capacity/fleet", params={"window": "1h"}).json() == kept
    with session_scope(factory) as s:  # the collection's write path, committed: a new version
        repositories.upsert_buckets(s, [_bucket(chat_id, T0, 777)])
    assert client.get("/api/v1/capacity/fleet", params={"window": "1h"}).status_code == 200
    assert cache.hits == 2 and cache.misses == 4  # nothing was served from before the write
