"""The Prometheus source against a real Prometheus scraping the simulator, into the real Postgres."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from backend.config import Settings
from backend.prom.client import PromClient
from backend.prom.queries import PoolLabels, cycle_queries
from backend.services.collect import run_prometheus
from backend.sim.server import start_in_thread
from tests.support import sim as simtruth
from tests.support.stack import close, cursor_end, fact_rows, factory_for

pytestmark = pytest.mark.prometheus
WIDTH = 5
FIELDS = {"drafts": 0, "draft_tokens": 1, "accepted_tokens": 2}
POOL_BY = "model_name, traffic_class, spec_mode"


def settings(db_url: str, prom_url: str, **kw) -> Settings:
    base = {"database_url": db_url, "prometheus_url": prom_url, "bucket_seconds": WIDTH, "settle_seconds": 2,
            "initial_lookback_seconds": 60, "collect_interval_seconds": 2}
    return Settings(**{**base, **kw})


@pytest.fixture
def steady(prometheus_factory):
    sim = start_in_thread("steady", seed=11)
    prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="1s")
    yield sim, prom
    sim.stop()


def prom_increase(prom, metric: str, at: float) -> dict[tuple, float]:
    res = prom.query(f"sum by ({POOL_BY}) (increase({metric}[{WIDTH}s]))", at=at)
    return {(r["metric"]["model_name"], r["metric"]["traffic_class"], r["metric"]["spec_mode"]):
            float(r["value"][1]) for r in res}


def test_stored_buckets_equal_prometheus_increase_and_truth(steady, fresh_db_url):
    sim, prom = steady
    prom.wait_for_samples("vllm:spec_decode_num_drafts_total", min_series=2)
    time.sleep(6 * WIDTH)
    s = settings(fresh_db_url, prom.url)
    summary = run_prometheus(factory_for(fresh_db_url), PromClient(prom.url), s, now=datetime.now(UTC))
    assert summary.rows_written > 0 and summary.rejected == 0
    rows = fact_rows(fresh_db_url)
    end = cursor_end(fresh_db_url)
    spec_pools = {k[:3] for k, v in rows.items() if v[0] is not None}
    assert {p[1] for p in spec_pools} == {"chat", "code"}
    bucket_starts = sorted({k[3] for k in rows})
    assert bucket_starts[-1] + WIDTH == end

    # 1. every bucket equals Prometheus's own increase() for that bucket, and none is missing
    for field, idx in FIELDS.items():
        metric = f"vllm:spec_decode_num_{'accepted_tokens' if field == 'accepted_tokens' else field}_total"
        for b in bucket_starts:
            theirs = prom_increase(prom, metric, b + WIDTH)
            ours = {k[:3]: v[idx] for k, v in rows.items() if k[3] == b and v[idx] is not None}
            assert ours.keys() == theirs.keys(), (field, b)
            for pool, value in theirs.items():
                assert close(ours[pool], value, 1e-12), (field, b, pool, ours[pool], value)

    # 2. summed over the window, within the extrapolation bound of the simulator's exact truth:
    # each bucket's increase() extrapolates over at most one scrape interval (1 s), so the error of a
    # sum of n buckets is at most n x the largest 1 s increase in the window.
    first, last = bucket_starts[1], bucket_starts[-1] + WIDTH  # the first bucket may predate 2 samples
    n = (last - first) // WIDTH
    bounds = simtruth.max_window_increase(sim.url, first, last, 1.0, list(FIELDS), step=0.5)
    for field, idx in FIELDS.items():
        truth = simtruth.true_increase(sim.url, first, last, field)
        bound = bounds[field]
        for pool in spec_pools:
            stored = sum(v[idx] for k, v in rows.items() if k[:3] == pool and first <= k[3] < last)
            assert abs(stored - truth[pool]) <= n * bound[pool], (field, pool, stored, truth[pool])
            assert abs(stored - truth[pool]) <= 0.05 * truth[pool], (field, pool, stored, truth[pool])
    for pool in spec_pools:
        a = sum(v[2] for k, v in rows.items() if k[:3] == pool and first <= k[3] < last)
        d = sum(v[1] for k, v in rows.items() if k[:3] == pool and first <= k[3] < last)
        ta = simtruth.true_increase(sim.url, first, last, "accepted_tokens")[pool]
        td = simtruth.true_increase(sim.url, first, last, "draft_tokens")[pool]
        assert abs(a / d - ta / td) < 0.01


def test_same_cycle_twice_changes_nothing(steady, fresh_db_url):
    _sim, prom = steady
    prom.wait_for_samples("vllm:spec_decode_num_drafts_total", min_series=2)
    time.sleep(3 * WIDTH)
    s = settings(fresh_db_url, prom.url)
    now = datetime.now(UTC)
    factory = factory_for(fresh_db_url)
    run_prometheus(factory, PromClient(prom.url), s, now=now)
    before = fact_rows(fresh_db_url, columns="drafts, accepted_tokens, itl_buckets, collected_at")
    # a re-delivered task runs the same cycle again (same `now`), and a backfill re-collects the same range
    run_prometheus(factory, PromClient(prom.url), s, now=now)
    first = min(k[3] for k in before)
    run_prometheus(factory, PromClient(prom.url), s, now=now, since=datetime.fromtimestamp(first, UTC),
                   kind="backfill")
    assert fact_rows(fresh_db_url, columns="drafts, accepted_tokens, itl_buckets, collected_at") == before


def test_requests_per_cycle_do_not_depend_on_pool_count(prometheus_factory, fresh_db_url):
    def fleet(n: int) -> dict:
        pools = [{"id": f"p{i}", "traffic_class": f"c{i}", "spec_mode": "eagle3" if i % 2 else "off",
                  "k": 3, "acceptance": {"mode": "rate", "r": 0.6}, "concurrency": 4} for i in range(n)]
        for p in pools:
            if p["spec_mode"] == "off":
                p.pop("k"), p.pop("acceptance")
        return {"name": f"fleet-{n}", "tick": 0.5,
                "defaults": {"model": "m"}, "pools": pools}

    counts = {}
    width = 10  # 400 pools make a large exposition: scrape every 3 s, so 10 s buckets hold 3 samples
    for n in (4, 400):
        sim = start_in_thread(fleet(n), seed=1)
        try:
            prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="3s")
            prom.wait_for_samples("vllm:generation_tokens_total", min_series=n, timeout=180)
            time.sleep(3 * width)
            client = PromClient(prom.url)
            s = settings(fresh_db_url, prom.url, bucket_seconds=width, settle_seconds=4,
                         initial_lookback_seconds=2 * width)
            summary = run_prometheus(factory_for(fresh_db_url), client, s, now=datetime.now(UTC))
            counts[n] = (summary.requests, len(summary.pools))
            prom.stop()
        finally:
            sim.stop()
    per_chunk = len(cycle_queries(PoolLabels(), width))
    assert counts[4][0] == counts[400][0] == per_chunk
    assert counts[4][1] == 4 and counts[400][1] == 400
