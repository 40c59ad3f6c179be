"""Scale-out: two collection workers (shard 0 and 1 of 2, run concurrently) against one real Prometheus
write exactly the buckets one unsharded worker writes: none missing, none doubled, same values. Once as
two threads calling the service, once as two real Celery worker processes, each configured as its shard
through the environment and consuming its own shard queue."""

from __future__ import annotations

import threading
import time
import zlib
from datetime import UTC, datetime

import pytest
from celery import Celery
from sqlalchemy import text

from backend.config import Settings
from backend.prom.client import PromClient
from backend.services.collect import run_prometheus, shard_of
from backend.sim.server import start_in_thread
from tests.support import db as dbsupport
from tests.support.stack import (
    cursor_end,
    env_for,
    fact_rows,
    factory_for,
    flush_redis,
    start_worker,
    wait_until,
)
from workers.schedule import COLLECT, beat_schedule, shard_queue

WIDTH = 5
SETTLE = 2
BACKFILL = "specwatch.metrics.backfill"


def _models() -> list[str]:
    """Four model names, two per shard of 2 (one with regex metacharacters)."""
    names = [f"org/model-{i}.v1 (x)" for i in range(40)]
    zero = [n for n in names if zlib.crc32(n.encode()) % 2 == 0][:2]
    one = [n for n in names if zlib.crc32(n.encode()) % 2 == 1][:2]
    return zero + one


def _scenario(models: list[str]) -> dict:
    pools = []
    for m in models:
        pools.append({"id": f"{abs(hash(m))}-s", "model": m, "traffic_class": "chat", "spec_mode": "eagle3", "k": 3,
                      "acceptance": {"mode": "rate", "r": 0.6}, "concurrency": 6})
        pools.append({"id": f"{abs(hash(m))}-o", "model": m, "traffic_class": "chat", "spec_mode": "off",
                      "concurrency": 6})
    return {"name": "shards", "tick": 0.5, "pools": pools}


def _settings(url: str, prom: str, **kw) -> Settings:
    kw = {"settle_seconds": SETTLE, "initial_lookback_seconds": 40, **kw}
    return Settings(_env_file=None, database_url=url, prometheus_url=prom, bucket_seconds=WIDTH, **kw)


@pytest.mark.prometheus
def test_two_shard_workers_write_exactly_the_unsharded_buckets(prometheus_factory, fresh_db_url, pg_admin_url,
                                                              pg_template) -> None:
    models = _models()
    assert {shard_of(m, 2) for m in models} == {0, 1}
    sim = start_in_thread(_scenario(models), seed=5)
    try:
        prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="1s")
        prom.wait_for_samples("vllm:generation_tokens_total", min_series=len(models) * 2)
        time.sleep(8 * WIDTH)
        now = datetime.now(UTC)
        name, sharded_url = dbsupport.clone(pg_admin_url, pg_template)
        try:
            whole = run_prometheus(factory_for(fresh_db_url), PromClient(prom.url), _settings(fresh_db_url, prom.url),
                                   now=now)
            results: dict[int, object] = {}

            def worker(i: int) -> None:
                results[i] = run_prometheus(factory_for(sharded_url), PromClient(prom.url),
                                            _settings(sharded_url, prom.url, shard_count=2, shard_index=i), now=now)

            threads = [threading.Thread(target=worker, args=(i,)) for i in (0, 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert set(results) == {0, 1}
            assert results[0].pools.isdisjoint(results[1].pools)
            assert results[0].pools | results[1].pools == whole.pools
            assert results[0].rows_written + results[1].rows_written == whole.rows_written > 0
            assert fact_rows(sharded_url) == fact_rows(fresh_db_url)
            end = cursor_end(fresh_db_url)
            assert cursor_end(sharded_url, "prometheus/shard-0-of-2") == end
            assert cursor_end(sharded_url, "prometheus/shard-1-of-2") == end
            with factory_for(sharded_url)() as s:
                assert s.execute(text("SELECT count(*) FROM pools")).scalar_one() == len(models) * 2
        finally:
            dbsupport.drop_database(pg_admin_url, name)
    finally:
        sim.stop()


def test_beat_sends_each_shards_collect_task_to_that_shards_queue() -> None:
    one = beat_schedule(Settings(_env_file=None))
    assert "queue" not in one["collect-prometheus-metrics"]["options"]
    entries = {name: e for name, e in beat_schedule(Settings(_env_file=None, shard_count=3)).items()
               if e["task"] == COLLECT}
    assert {e["options"]["queue"] for e in entries.values()} == {
        "collect.shard-0-of-3", "collect.shard-1-of-3", "collect.shard-2-of-3"}
    assert sorted(entries) == [f"collect-prometheus-metrics-shard-{i}-of-3" for i in range(3)]
    # sharding splits the Prometheus collection only
    scrape = beat_schedule(Settings(_env_file=None, source="scrape", shard_count=3))
    assert not any(e["task"] == COLLECT for e in scrape.values())


def _runs(url: str) -> list[tuple]:
    eng = factory_for(url).kw["bind"]
    try:
        with eng.connect() as conn:
            return conn.execute(text("select kind, status, error, pools, rows_written, window_start, "
                                     "window_end from collection_runs order by id")).all()
    finally:
        eng.dispose()


def _pools(url: str) -> set[tuple]:
    eng = factory_for(url).kw["bind"]
    try:
        with eng.connect() as conn:
            return set(conn.execute(text("select model_name, traffic_class, spec_mode from pools")).all())
    finally:
        eng.dispose()


def _finished(url: str, n: int) -> bool:
    rows = _runs(url)
    failed = [r for r in rows if r.status == "failed"]
    assert not failed, failed
    return len(rows) >= n and all(r.status == "ok" for r in rows)


@pytest.mark.e2e
@pytest.mark.prometheus
def test_two_celery_shard_workers_write_exactly_the_unsharded_buckets(
        prometheus_factory, fresh_db_url, pg_admin_url, pg_template, redis_url, tmp_path) -> None:
    """Two `celery worker` processes, SPECWATCH_SHARD_INDEX 0 and 1 of SPECWATCH_SHARD_COUNT 2, each
    consuming collect.shard-i-of-2; one collect task per shard queue: together they write the rows of one
    unsharded run (pools split, none twice), each shard's cursor ends where the unsharded one does, and
    running the shard tasks again (collect and a back-fill of the whole window) changes no row."""
    models = _models()
    lookback = 24 * WIDTH  # reaches back before the simulator started: the rows do not depend on the clock
    flush_redis(redis_url)
    name, sharded_url = dbsupport.clone(pg_admin_url, pg_template)
    sim = start_in_thread(_scenario(models), seed=7)
    sim_running, shard_workers = True, ()
    try:
        prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="1s")
        base = {"database_url": sharded_url, "prometheus_url": prom.url, "redis_url": redis_url,
                "bucket_seconds": WIDTH, "settle_seconds": SETTLE, "initial_lookback_seconds": lookback,
                "data_dir": str(tmp_path), "shard_count": 2}
        shard_workers = tuple(start_worker(env_for({**base, "shard_index": i}), tmp_path, f"shard{i}")
                              for i in (0, 1))
        for i, w in enumerate(shard_workers):
            wait_until(lambda w=w: " ready." in w.tail(400), 300, f"{w.name} to be ready", shard_workers)
            assert shard_queue(i, 2) in w.tail(400) and shard_queue(1 - i, 2) not in w.tail(400)
        prom.wait_for_samples("vllm:generation_tokens_total", min_series=len(models) * 2)
        time.sleep(3 * WIDTH)
        # no more samples from here on: Prometheus drops the target (the event: it reports none), then
        # the simulator stops (a scrape on a kept-alive connection could outlive the server's socket)
        prom.targets = []
        prom.reload()
        wait_until(lambda: not prom.target_health(), 300, "Prometheus to drop its target",
                   seen=prom.target_health)
        sim.stop()
        sim_running = False
        # no sample after `stopped`: every bucket ending after it is empty. Send both tasks just after a
        # bucket became complete, so both workers (idle, ready) see the same newest complete bucket `end`.
        stopped = time.time()
        end = int(-(-stopped // WIDTH) * WIDTH)
        time.sleep(max(0.0, end + SETTLE + 0.2 - time.time()))
        app = Celery(broker=redis_url)
        for i in (0, 1):
            app.send_task(COLLECT, queue=shard_queue(i, 2))
        wait_until(lambda: _finished(sharded_url, 2), 300, "both shard tasks", shard_workers,
                   seen=lambda: _runs(sharded_url))
        assert cursor_end(sharded_url, "prometheus/shard-0-of-2") == end
        assert cursor_end(sharded_url, "prometheus/shard-1-of-2") == end
        assert cursor_end(sharded_url) is None  # no unsharded cursor: nobody collected everything

        whole = run_prometheus(factory_for(fresh_db_url), PromClient(prom.url), _settings(
            fresh_db_url, prom.url, initial_lookback_seconds=lookback),
            now=datetime.fromtimestamp(end + SETTLE + 0.2, UTC))
        assert cursor_end(fresh_db_url) == end
        rows = fact_rows(sharded_url)
        assert rows == fact_rows(fresh_db_url) and len(rows) >= len(models) * 2
        # every pool written by a shard; none by both: |A| + |B| == |A u B| == the unsharded run's pools
        shard_runs = _runs(sharded_url)
        assert [r.kind for r in shard_runs] == ["collect", "collect"]
        assert len({(r.window_start, r.window_end) for r in shard_runs}) == 1
        assert _pools(sharded_url) == whole.pools == _pools(fresh_db_url)
        per_shard = [sum(1 for p in whole.pools if shard_of(p[0], 2) == i) for i in (0, 1)]
        assert sorted(r.pools for r in shard_runs) == sorted(per_shard) == [len(models), len(models)]
        assert sum(r.pools for r in shard_runs) == len(whole.pools) == len(models) * 2
        assert sum(r.rows_written for r in shard_runs) == whole.rows_written == len(rows)

        # run the shard tasks again: a collect from each cursor and a back-fill over the whole window
        since = datetime.fromtimestamp(min(k[3] for k in rows) - WIDTH, UTC).isoformat()
        until = datetime.fromtimestamp(end, UTC).isoformat()
        for i in (0, 1):
            app.send_task(COLLECT, queue=shard_queue(i, 2))
            app.send_task(BACKFILL, args=[since, until], queue=shard_queue(i, 2))
        wait_until(lambda: _finished(sharded_url, 6), 300, "the re-runs", shard_workers,
                   seen=lambda: _runs(sharded_url))
        again = _runs(sharded_url)[2:]
        assert sorted(r.kind for r in again) == ["backfill", "backfill", "collect", "collect"]
        assert sum(r.rows_written for r in again if r.kind == "backfill") == len(rows)
        assert fact_rows(sharded_url) == rows
        assert _pools(sharded_url) == whole.pools
        assert cursor_end(sharded_url, "prometheus/shard-0-of-2") >= end
        assert cursor_end(sharded_url, "prometheus/shard-1-of-2") >= end
    finally:
        for w in shard_workers:
            w.stop()
        if sim_running:
            sim.stop()
        dbsupport.drop_database(pg_admin_url, name)
