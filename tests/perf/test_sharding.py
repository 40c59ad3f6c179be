"""Scale-out: two collection workers (shard 0 and 1 of 2, run concurrently) against one real Prometheus
write exactly the buckets one unsharded worker writes: none missing, none doubled, same values."""

from __future__ import annotations

import threading
import time
import zlib
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from backend.config import Settings
from backend.prom.client import PromClient
from backend.services.collect import run_prometheus, shard_of
from backend.sim.server import start_in_thread
from tests.support import db as dbsupport
from tests.support.stack import cursor_end, fact_rows, factory_for

pytestmark = pytest.mark.prometheus
WIDTH = 5


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
    return Settings(_env_file=None, database_url=url, prometheus_url=prom, bucket_seconds=WIDTH, settle_seconds=2,
                    initial_lookback_seconds=40, **kw)


def test_two_shard_workers_write_exactly_the_unsharded_buckets(prometheus_factory, fresh_db_url, pg_admin_url,
                                                              pg_template) -> None:
    models = _models()
    assert {shard_of(m, 2) for m in models} == {0, 1}
    sim = start_in_thread(_scenario(models), seed=5)
    try:
        prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="1s")
        prom.wait_for_samples("vllm:generation_tokens_total", min_series=len(models) * 2, timeout=60)
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
