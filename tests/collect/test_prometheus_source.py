"""The Prometheus source against a real Prometheus scraping the simulator, into the real Postgres."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from backend.config import Settings
from backend.db.session import session_scope
from backend.prom.client import PromClient, PromQueryError
from backend.services.collect import INCREASE_SOURCE, RAW_SOURCE, run_prometheus
from backend.services.collect_chunks import (
    known_series,
    latest_complete_end,
    raw_lookback,
    raw_requests_per_chunk,
    raw_samples_per_series,
)
from backend.sim.server import start_in_thread
from tests.support import db as dbsupport
from tests.support import sim as simtruth
from tests.support.prometheus import PrometheusServer
from tests.support.stack import close, cursor_end, fact_rows, factory_for

pytestmark = pytest.mark.prometheus
WIDTH = 5
FIELDS = {"drafts": 0, "draft_tokens": 1, "accepted_tokens": 2}
POOL_BY = "model_name, traffic_class, spec_mode"


def settings(db_url: str, prom_url: str, **kw) -> Settings:
    # replica rows one bucket wide: every chunk also asks the replica queries (a fixed number of them)
    base = {"database_url": db_url, "prometheus_url": prom_url, "bucket_seconds": WIDTH, "settle_seconds": 2,
            "initial_lookback_seconds": 60, "collect_interval_seconds": 2,
            "replica_bucket_seconds": kw.get("bucket_seconds", WIDTH)}
    return Settings(**{**base, **kw})


@pytest.fixture(scope="module")
def steady(prometheus_bin, tmp_path_factory):
    """The steady fleet scraped every second by one Prometheus for the module's read-only tests; they ask
    for history with `history(prom, seconds)`, which waits only for what the earlier tests have not."""
    sim = start_in_thread("steady", seed=11)
    prom = PrometheusServer([{"target": sim.url, "metrics_path": "/metrics"}], binary=prometheus_bin,
                            scrape_interval="1s", data_dir=tmp_path_factory.mktemp("prometheus-steady"))
    try:
        prom.start()
        yield sim, prom
    finally:
        prom.stop()
        sim.stop()


@pytest.fixture
def steady_own(prometheus_factory):
    """The steady fleet with a Prometheus of the test's own (for a test that restarts it with other flags)."""
    sim = start_in_thread("steady", seed=11)
    prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="1s")
    yield sim, prom
    sim.stop()


_HISTORY_SINCE: dict[PrometheusServer, float] = {}


def history(prom, seconds: float) -> None:
    """Wait until Prometheus holds `seconds` of samples of the steady fleet (from its first sample)."""
    prom.wait_for_samples("vllm:spec_decode_num_drafts_total", min_series=2)
    since = _HISTORY_SINCE.setdefault(prom, time.time())
    time.sleep(max(0.0, since + seconds - time.time()))


@pytest.fixture
def more_dbs(pg_admin_url, pg_template) -> Iterator[Callable[[], str]]:
    """make() -> the URL of one more migrated database of its own (dropped after the test)."""
    names = []

    def make() -> str:
        name, url = dbsupport.clone(pg_admin_url, pg_template)
        names.append(name)
        return url

    yield make
    for name in names:
        dbsupport.drop_database(pg_admin_url, name)


def prom_increase(prom, metric: str, at: float) -> dict[tuple, float]:
    res = prom.query(f"sum by ({POOL_BY}) (increase({metric}[{WIDTH}s]))", at=at)
    return {(r["metric"]["model_name"], r["metric"]["traffic_class"], r["metric"]["spec_mode"]):
            float(r["value"][1]) for r in res}


def prom_last(prom, metric: str, at: float) -> dict[tuple, float]:
    """Per pool, the sum over its series of each one's last raw sample at or before `at` (Prometheus' own)."""
    res = prom.query(f"sum by ({POOL_BY}) (last_over_time({metric}[300s]))", at=at)
    return {(r["metric"]["model_name"], r["metric"]["traffic_class"], r["metric"]["spec_mode"]):
            float(r["value"][1]) for r in res}


def sources(url: str) -> set[str]:
    with factory_for(url)() as session:
        return set(session.scalars(text("select distinct source from pool_buckets")))


def _collected(prom, url: str, source: str, **overrides) -> tuple:
    """One collection cycle over six buckets of history into `url`, every row stored as `source`: the cycle's
    summary, the fact rows, the spec-decode pools (chat and code) and the bucket starts (the last bucket ends
    at the cursor)."""
    history(prom, 6 * WIDTH)
    summary = run_prometheus(factory_for(url), PromClient(prom.url), settings(url, prom.url, **overrides),
                             now=datetime.now(UTC))
    assert summary.rows_written > 0 and summary.rejected == 0
    assert sources(url) == {source}
    rows = fact_rows(url)
    spec_pools = {k[:3] for k, v in rows.items() if v[0] is not None}
    assert {p[1] for p in spec_pools} == {"chat", "code"}
    bucket_starts = sorted({k[3] for k in rows})
    assert bucket_starts[-1] + WIDTH == cursor_end(url)
    return summary, rows, spec_pools, bucket_starts


def _truth_bounds(sim, prom, first: float, last: float) -> tuple[float, dict]:
    """The longest gap between scrapes Prometheus has in (first, last], rounded up to 0.5 s (at least 1 s),
    and per field and pool the largest increase of the simulator's truth over a window that long."""
    raw = prom.query(f"vllm:spec_decode_num_drafts_total[{last - first + WIDTH}s]", at=last)
    gap = max(b - a for series in raw for a, b in itertools.pairwise(float(t) for t, _ in series["values"]))
    window = max(1.0, math.ceil(gap / 0.5) * 0.5)
    return window, simtruth.max_window_increase(sim.url, first - window, last, window, list(FIELDS), step=0.5)


def test_stored_buckets_are_the_raw_samples_exact_increases_and_telescope_to_truth(steady, fresh_db_url):
    sim, prom = steady
    assert settings(fresh_db_url, prom.url).prometheus_increases == "raw"  # the default
    summary, rows, spec_pools, bucket_starts = _collected(prom, fresh_db_url, RAW_SOURCE)
    assert summary.bytes_read > 0

    # 1. every bucket (b, b + W] is, per pool, the change of the sum of its series' last samples from b to
    # b + W, as Prometheus itself reads them (no reset in this scenario): nothing extrapolated
    first, last = bucket_starts[1], bucket_starts[-1] + WIDTH  # the first bucket may predate 2 samples
    for field, idx in (*FIELDS.items(), ("generation_tokens", 8)):
        metric = f"vllm:{'generation_tokens' if idx == 8 else 'spec_decode_num_' + field}_total"
        for b in range(first, last, WIDTH):
            at_start, at_end = prom_last(prom, metric, b), prom_last(prom, metric, b + WIDTH)
            ours = {k[:3]: v[idx] for k, v in rows.items() if k[3] == b and v[idx] is not None}
            assert ours.keys() == at_end.keys(), (field, b)
            for pool, value in at_end.items():
                assert close(ours[pool], value - at_start[pool], 1e-12), (field, b, pool, ours[pool])

    # 2. so a run of buckets telescopes: its sum is off the simulator's truth only by the counts between
    # the last sample and each end of the run (one gap between scrapes at each end, never n of them)
    _window, bounds = _truth_bounds(sim, prom, first, last)
    for field, idx in FIELDS.items():
        truth = simtruth.true_increase(sim.url, first, last, field)
        for pool in spec_pools:
            stored = sum(v[idx] for k, v in rows.items() if k[:3] == pool and first <= k[3] < last)
            assert abs(stored - truth[pool]) <= 2 * bounds[field][pool], (field, pool, stored, truth[pool])


def test_increase_setting_stores_prometheus_increase_and_truth(steady, fresh_db_url):
    sim, prom = steady
    _summary, rows, spec_pools, bucket_starts = _collected(prom, fresh_db_url, INCREASE_SOURCE,
                                                           prometheus_increases="increase")

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
    # each bucket's increase() extrapolates over at most one gap between scrapes (1 s, longer when a
    # busy machine delays or drops scrapes: the longest gap Prometheus actually has), so the error of a
    # sum of n buckets is at most n x the largest increase over such a gap in the window.
    # the first buckets may predate 2 samples of a series (increase() then has no value): start after them
    partial = [k[3] for k, v in rows.items() if k[:3] in spec_pools and any(v[j] is None for j in FIELDS.values())]
    first, last = max([bucket_starts[1], *(b + WIDTH for b in partial)]), bucket_starts[-1] + WIDTH
    assert first < last, (partial, bucket_starts)
    n = (last - first) // WIDTH
    window, bounds = _truth_bounds(sim, prom, first, last)
    for field, idx in FIELDS.items():
        truth = simtruth.true_increase(sim.url, first, last, field)
        bound = bounds[field]
        for pool in spec_pools:
            stored = sum(v[idx] for k, v in rows.items() if k[:3] == pool and first <= k[3] < last)
            assert abs(stored - truth[pool]) <= n * bound[pool], (field, pool, stored, truth[pool], window)
            if window == 1.0:  # scraped on time: the bound is tight
                assert abs(stored - truth[pool]) <= 0.05 * truth[pool], (field, pool, stored, truth[pool])
    for pool in spec_pools:
        a = sum(v[2] for k, v in rows.items() if k[:3] == pool and first <= k[3] < last)
        d = sum(v[1] for k, v in rows.items() if k[:3] == pool and first <= k[3] < last)
        ta = simtruth.true_increase(sim.url, first, last, "accepted_tokens")[pool]
        td = simtruth.true_increase(sim.url, first, last, "draft_tokens")[pool]
        assert abs(a / d - ta / td) < 0.01


def test_same_cycle_twice_changes_nothing(steady, fresh_db_url):
    _sim, prom = steady
    history(prom, 3 * WIDTH)
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
    settle = 4
    # 100 pools make a 1.8 MB exposition: a quarter of a second to render on an idle 2-core machine, a few
    # seconds under a loaded suite, so that fleet is scraped every 10 s (timeout 10 s). The engine-step
    # simulation costs ~0.13 s of CPU per simulated second at 100 pools, so it runs at a fifth of real time
    # (counters still grow).
    for n, interval, width, time_scale in ((4, 3, 10, 1.0), (100, 10, 20, 0.2)):
        sim = start_in_thread(fleet(n), seed=1, time_scale=time_scale)
        try:
            prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}],
                                      scrape_interval=f"{interval}s")
            # first every pool is scraped; then the event: every pool has 2+ samples in one bucket the cycle
            # reads, a bucket that starts after the first scrape (a bucket chosen before Prometheus scraped at
            # all could hold one sample at most, and the wait would never end)
            prom.wait_for_samples("vllm:generation_tokens_total", min_series=n, timeout=1200)
            end = latest_complete_end(time.time(), width, settle) + 2 * width
            prom.wait_for_samples(f"count_over_time(vllm:generation_tokens_total[{width}s]) >= 2",
                                  min_series=n, at=end, timeout=1200)
            time.sleep(max(0.0, end + settle + 0.1 - time.time()))  # the bucket is complete for the cycle
            client = PromClient(prom.url)
            s = settings(fresh_db_url, prom.url, bucket_seconds=width, settle_seconds=settle,
                         initial_lookback_seconds=2 * width)
            summary = run_prometheus(factory_for(fresh_db_url), client, s,
                                     now=datetime.fromtimestamp(end + settle + 0.1, UTC))
            counts[n] = (summary.requests, len(summary.pools))
            prom.stop()
        finally:
            sim.stop()
    # one request per family part (and one for the `_created` series, one for the gauge, one for the
    # drafter / vLLM version labels), every chunk also making the replica rows from the same samples
    assert counts[4][0] == counts[100][0] == raw_requests_per_chunk() == 20
    assert counts[4][1] == 4 and counts[100][1] == 100


def test_max_samples_splits_a_backfill_into_chunks_that_write_the_same_buckets(steady_own, fresh_db_url, more_dbs):
    _sim, prom = steady_own
    history(prom, 6 * WIDTH)
    now = datetime.now(UTC)
    # the lookback for the sample before a chunk kept short: here it would cost more than the chunk
    default = settings(fresh_db_url, prom.url, scrape_max_gap_seconds=WIDTH)
    buckets = 5  # the back-fill: the 5 newest complete buckets
    since = datetime.fromtimestamp(latest_complete_end(now.timestamp(), WIDTH, default.settle_seconds)
                                   - buckets * WIDTH, UTC)

    # the reference: the default limit does not bind, the whole back-fill is one chunk
    whole = run_prometheus(factory_for(fresh_db_url), PromClient(prom.url), default, now=now, since=since,
                           kind="backfill")
    assert whole.chunks == 1 and whole.buckets == buckets and whole.rejected == 0
    reference = fact_rows(fresh_db_url)

    # a collector that has seen the fleet (one ordinary cycle of one bucket stored its pools and layouts),
    # with a limit that lets a query load one bucket (Prometheus scrapes every second here)
    seen_url = more_dbs()
    seen = factory_for(seen_url)
    run_prometheus(seen, PromClient(prom.url), settings(seen_url, prom.url, initial_lookback_seconds=WIDTH,
                                                        scrape_max_gap_seconds=WIDTH), now=now)
    with session_scope(seen) as session:
        series = known_series(session, raw=True)
    assert series >= 4 * 2  # 4 pools x (at least one bound + Inf)
    limit = series * raw_samples_per_series(1, WIDTH, 1.0, raw_lookback(default))
    tiny = {"prometheus_max_samples": limit, "prometheus_scrape_interval_seconds": 1, "scrape_max_gap_seconds": WIDTH}

    # Prometheus itself enforces that limit from now on (same TSDB): the unsplit back-fill is refused
    prom.extra_args.append(f"--query.max-samples={limit}")
    prom.restart()
    with pytest.raises(PromQueryError, match="samples"):
        run_prometheus(factory_for(fresh_db_url), PromClient(prom.url),
                       settings(fresh_db_url, prom.url, prometheus_max_samples=0, scrape_max_gap_seconds=WIDTH),
                       now=now, since=since,
                       kind="backfill")

    # split: one bucket per chunk, every query under the limit, exactly the reference's buckets
    split = run_prometheus(seen, PromClient(prom.url), settings(seen_url, prom.url, **tiny), now=now, since=since,
                           kind="backfill")
    assert split.buckets == whole.buckets and split.chunks == split.buckets > whole.chunks
    assert split.requests == split.chunks * raw_requests_per_chunk()
    assert fact_rows(seen_url) == reference

    # nothing stored yet: the first chunk is sized by points only (2 buckets, under the limit here), the
    # next ones from the largest answer so far (one bucket each)
    blank_url = more_dbs()
    blank = run_prometheus(factory_for(blank_url), PromClient(prom.url),
                           settings(blank_url, prom.url, backfill_chunk_buckets=2, **tiny), now=now, since=since,
                           kind="backfill")
    assert blank.chunks == 1 + (whole.buckets - 2)
    assert fact_rows(blank_url) == reference


def test_collect_once_names_the_pools_prometheus_holds_even_with_nothing_to_collect(steady, fresh_db_url):
    """`specwatch collect --once` prints the pools it found: those Prometheus has series of, by name, also
    when the cycle has no complete bucket to collect (run twice in a row)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from backend.services.collect import pools_in_prometheus
    from tests.support.stack import env_for

    _sim, prom = steady
    prom.wait_for_samples("vllm:generation_tokens_total", min_series=4)
    s = settings(fresh_db_url, prom.url)
    found = pools_in_prometheus(PromClient(prom.url), s, now=datetime.now(UTC))
    truth = {(r["metric"]["model_name"], r["metric"]["traffic_class"], r["metric"]["spec_mode"])
             for r in prom.query(f"count by ({POOL_BY}) (vllm:generation_tokens_total)", at=time.time())}
    assert {tuple(p) for p in found} == truth and len(truth) == 4
    env = env_for({"database_url": fresh_db_url, "prometheus_url": prom.url, "source": "prometheus"})
    exe = str(Path(sys.executable).with_name("specwatch"))
    runs = [subprocess.run([exe, "collect", "--once", "--json"], env=env, capture_output=True, text=True,
                           timeout=120, check=False) for _ in range(2)]
    for res in runs:
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert {(p["model"], p["traffic_class"], p["spec_mode"]) for p in out["pools"]} == truth, out
