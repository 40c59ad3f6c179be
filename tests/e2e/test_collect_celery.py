"""End to end: simulator -> real Prometheus -> real Celery worker + beat -> Postgres, with faults."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from celery import Celery
from sqlalchemy import text

from backend.config import Settings
from backend.prom.client import PromClient
from backend.services.collect import run_prometheus
from backend.sim.server import start_in_thread
from tests.support.stack import (
    close,
    cursor_end,
    env_for,
    fact_rows,
    factory_for,
    flush_redis,
    start_beat,
    start_worker,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.prometheus]
WIDTH = 5
POOL_BY = "model_name, traffic_class, spec_mode"


def prom_by_pool(prom, promql: str, at: float) -> dict[tuple, float]:
    return {(r["metric"]["model_name"], r["metric"]["traffic_class"], r["metric"]["spec_mode"]):
            float(r["value"][1]) for r in prom.query(promql, at=at)}


def assert_exact_from_prometheus_samples(prom, rows: dict, first: int, end: int) -> int:
    """Every bucket (b, b + W] in [first, end) holds, per pool, the change of the sum of its series' last raw
    samples from b to b + W, as Prometheus reads them (no reset here), wherever the pool has a sample in it,
    and is absent where it has none; so the run telescopes to the counters' own change, outage included."""
    checked = 0
    for field, idx, metric in (("drafts", 0, "vllm:spec_decode_num_drafts_total"),
                               ("accepted_tokens", 2, "vllm:spec_decode_num_accepted_tokens_total"),
                               ("generation_tokens", 8, "vllm:generation_tokens_total")):
        last = f"sum by ({POOL_BY}) (last_over_time({metric}[300s]))"
        for b in range(first, end, WIDTH):
            start, stop = prom_by_pool(prom, last, b), prom_by_pool(prom, last, b + WIDTH)
            sampled = prom_by_pool(prom, f"sum by ({POOL_BY}) (count_over_time({metric}[{WIDTH}s]))", b + WIDTH)
            ours = {k[:3]: v[idx] for k, v in rows.items() if k[3] == b and v[idx] is not None}
            assert ours.keys() == sampled.keys(), (field, b, sorted(ours), sorted(sampled))
            for pool, value in ours.items():
                assert close(value, stop[pool] - start[pool], 1e-12), (field, b, pool, value)
                checked += 1
        total, begin = prom_by_pool(prom, last, end), prom_by_pool(prom, last, first)
        for pool, value in total.items():
            run = sum(v[idx] for k, v in rows.items() if k[:3] == pool and first <= k[3] < end)
            assert close(run, value - begin[pool], 1e-12), (field, pool, run, value - begin[pool])
    return checked


def base_settings(db_url: str, prom_url: str, redis_url: str, **kw) -> dict:
    return {"database_url": db_url, "prometheus_url": prom_url, "redis_url": redis_url,
            "bucket_seconds": WIDTH, "collect_interval_seconds": 2, "settle_seconds": 2,
            "initial_lookback_seconds": 4 * WIDTH, "broker_visibility_timeout_seconds": 4,
            "data_dir": "/tmp", **kw}


def runs(url: str) -> list[tuple]:
    eng = factory_for(url).kw["bind"]
    with eng.connect() as conn:
        return conn.execute(text("select kind, status, error from collection_runs order by id")).all()


def test_worker_and_beat_collect_everything_and_backfill_a_prometheus_outage(
        prometheus_factory, fresh_db_url, redis_url, tmp_path):
    flush_redis(redis_url)
    sim = start_in_thread("steady", seed=5)
    prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="1s")
    env = env_for(base_settings(fresh_db_url, prom.url, redis_url))
    worker, beat = start_worker(env, tmp_path), start_beat(env, tmp_path)
    try:
        started = time.time()
        wait_until(lambda: (cursor_end(fresh_db_url) or 0) >= started + 3 * WIDTH, 300, "first buckets",
                   (worker, beat), seen=lambda: cursor_end(fresh_db_url))
        prom.stop()
        outage_start = time.time()
        # the outage: until a collection has failed on it, and at least 3 widths (a whole bucket inside)
        wait_until(lambda: any(s == "failed" and "PromUnavailable" in (e or "") for _, s, e in runs(fresh_db_url)),
                   300, "a collection run failed on the outage", (worker, beat), seen=lambda: runs(fresh_db_url)[-3:])
        time.sleep(max(0.0, outage_start + 3 * WIDTH - time.time()))
        prom.start()
        back = time.time()
        wait_until(lambda: (cursor_end(fresh_db_url) or 0) >= back + 3 * WIDTH, 300, "back-fill", (worker, beat),
                   seen=lambda: cursor_end(fresh_db_url))
    finally:
        beat.stop()
        worker.stop()
        sim.stop()
    rows = fact_rows(fresh_db_url)
    end = int(cursor_end(fresh_db_url))
    first = min(k[3] for k in rows) + WIDTH
    assert {k[1:3] for k in rows} == {("chat", "eagle3"), ("chat", "off"), ("code", "eagle3"), ("code", "off")}
    checked = assert_exact_from_prometheus_samples(prom, rows, first, end)
    assert checked >= 30
    statuses = runs(fresh_db_url)
    assert any(s == "failed" and "PromUnavailable" in (e or "") for _, s, e in statuses), statuses
    assert statuses[-1][1] == "ok"
    # the outage left buckets without samples in Prometheus: they are absent here too, never zero
    outage_buckets = [b for b in range(int(outage_start) // WIDTH * WIDTH + WIDTH, int(back) - WIDTH, WIDTH)]
    assert outage_buckets and all((k[3] not in outage_buckets) or v[0] != 0 for k, v in rows.items())


def test_sigkill_mid_task_then_redelivery_leaves_the_same_table(prometheus_factory, pg_admin_url, pg_template,
                                                                redis_url, tmp_path):
    from tests.support import db as dbsupport

    flush_redis(redis_url)
    sim = start_in_thread("steady", seed=9)
    prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="1s")
    prom.wait_for_samples("vllm:spec_decode_num_drafts_total", min_series=2)
    time.sleep(8 * WIDTH)
    sim.stop()
    until = int(time.time()) // WIDTH * WIDTH - WIDTH
    since = until - 150 * WIDTH  # mostly before the simulator started: a long task with data at its end
    dbs = [dbsupport.clone(pg_admin_url, pg_template) for _ in range(2)]
    try:
        (_, crashed_url), (_, clean_url) = dbs
        # the uninterrupted run
        s = Settings(**base_settings(clean_url, prom.url, redis_url))
        run_prometheus(factory_for(clean_url), PromClient(prom.url), s, now=datetime.now(UTC),
                       since=datetime.fromtimestamp(since, UTC), until=datetime.fromtimestamp(until, UTC),
                       kind="backfill")
        # the same back-fill as a task, one bucket per chunk so it is slow enough to kill half-way
        env = env_for(base_settings(crashed_url, prom.url, redis_url, backfill_chunk_buckets=1))
        worker = start_worker(env, tmp_path, "w1")
        app = Celery(broker=redis_url)
        app.send_task("specwatch.metrics.backfill", args=[datetime.fromtimestamp(since, UTC).isoformat(),
                                                          datetime.fromtimestamp(until, UTC).isoformat()])
        # kill on the first chunk's commit (polled often: the task has 150 chunks, most of them empty)
        wait_until(lambda: cursor_end(crashed_url), 300, "the first chunk to commit", (worker,), every=0.02)
        worker.kill()
        assert cursor_end(crashed_url) < until  # died mid-task ...
        assert len(fact_rows(crashed_url)) < len(fact_rows(clean_url))
        assert runs(crashed_url)[-1][1] == "running"  # ... and its run record says so
        worker2 = start_worker(env, tmp_path, "w2")
        try:
            wait_until(lambda: any(k == "backfill" and st == "ok" for k, st, _ in runs(crashed_url)), 300,
                       "re-delivery to finish", (worker2,), seen=lambda: runs(crashed_url))
        finally:
            worker2.stop()
        cols = "drafts, draft_tokens, accepted_tokens, accepted_per_pos, itl_buckets, tpot_buckets, running_mean"
        assert fact_rows(crashed_url, cols) == fact_rows(clean_url, cols)
    finally:
        for name, _ in dbs:
            dbsupport.drop_database(pg_admin_url, name)
