"""The direct-scrape source on the same live run as the Prometheus source, with counter resets."""

from __future__ import annotations

import math
import threading
import time
from datetime import UTC, datetime

import pytest

from backend.config import Settings
from backend.prom.client import PromClient
from backend.services import scrape
from backend.services.collect import run_prometheus
from backend.sim.server import start_in_thread
from tests.support import db as dbsupport
from tests.support import sim as simtruth
from tests.support.stack import fact_rows, factory_for

pytestmark = pytest.mark.prometheus
WIDTH = 5
FIELDS = {"drafts": 0, "draft_tokens": 1, "accepted_tokens": 2, "generation_tokens": 8}

SCENARIO = {
    "name": "restart-fast", "tick": 0.1,
    "defaults": {"model": "m", "step_time": {"base": 0.007, "per_seq": 0.00012}},
    "pools": [
        {"id": "chat-eagle3", "traffic_class": "chat", "spec_mode": "eagle3", "k": 3,
         "acceptance": {"mode": "rate", "r": 0.7}, "concurrency": 16},
        {"id": "chat-off", "traffic_class": "chat", "spec_mode": "off", "concurrency": 16},
    ],
    "events": [{"pool": "chat-eagle3", "every": 11, "restart": True}],
}


def scraped_at(url: str) -> list[float]:
    from sqlalchemy import text

    with factory_for(url)() as session:
        return [r[0] for r in session.execute(text(
            "select distinct extract(epoch from scraped_at)::float8 from raw_scrapes order by 1"))]


def test_scrape_and_prometheus_agree_and_resets_never_go_negative(prometheus_factory, pg_admin_url, pg_template):
    sim = start_in_thread(SCENARIO, seed=3)
    prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="1s")
    dbs = [dbsupport.clone(pg_admin_url, pg_template) for _ in range(2)]
    (_, scrape_url), (_, prom_url) = dbs
    common = {"bucket_seconds": WIDTH, "settle_seconds": 2, "initial_lookback_seconds": 60, "scrape_interval_seconds": 1,
                  "scrape_targets": [{"url": f"{sim.url}/metrics", "labels": {}}]}
    s_scrape = Settings(database_url=scrape_url, source="scrape", **common)
    s_prom = Settings(database_url=prom_url, prometheus_url=prom.url, **common)
    stop = threading.Event()

    def scraper() -> None:
        factory = factory_for(scrape_url)
        while not stop.is_set():
            scrape.scrape_targets(factory, s_scrape, now=datetime.now(UTC))
            stop.wait(1.0)

    thread = threading.Thread(target=scraper, daemon=True)
    try:
        prom.wait_for_samples("vllm:spec_decode_num_drafts_total")
        thread.start()
        time.sleep(8 * WIDTH)
        stop.set()
        thread.join()
        now = datetime.now(UTC)
        scrape.finalize(factory_for(scrape_url), s_scrape, now=now)
        run_prometheus(factory_for(prom_url), PromClient(prom.url), s_prom, now=now)
        by_scrape, by_prom = fact_rows(scrape_url), fact_rows(prom_url)
        common_buckets = sorted({k[3] for k in by_scrape} & {k[3] for k in by_prom})[1:-1]
        first, last = common_buckets[0], common_buckets[-1] + WIDTH
        n = len(common_buckets)
        # on a loaded machine the scraper's interval stretches: bound with the longest real gap
        gap = max(b - a for a, b in zip(scraped_at(scrape_url), scraped_at(scrape_url)[1:]))
        window = max(1.0, math.ceil(gap / 0.5) * 0.5)
        bounds = simtruth.max_window_increase(sim.url, first - window, last, window, list(FIELDS), step=0.5)
        # increments between a pool's last scrape and its restart are lost to every scraper (and to
        # Prometheus): the truth counts them (cumulative_since_start), so each restart may cost one gap
        doc = simtruth.truth(sim.url, last)
        restarts = {key: sum(first < t <= last for t in p["restarts"]) for key, p in doc.items()}
        for field, idx in FIELDS.items():
            truth = simtruth.true_increase(sim.url, first, last, field)
            for pool, bound in bounds[field].items():
                per = {src: [v[idx] for k, v in rows.items() if k[:3] == pool and k[3] in common_buckets]
                       for src, rows in (("scrape", by_scrape), ("prometheus", by_prom))}
                for src, values in per.items():
                    # a reset never gives a negative or an inflated bucket
                    assert all(v >= 0 for v in values), (src, field, pool)
                    assert max(values) <= 2 * truth[pool] / n + 2 * bound, (src, field, pool, max(values))
                # direct scrape is exact at its scrape instants: off by at most one scrape interval per end
                lost = restarts[pool] * bound
                assert truth[pool] - lost - 2 * bound - 1e-9 <= sum(per["scrape"]) <= truth[pool] + 2 * bound, \
                    (field, pool)
                # the two sources agree within increase()'s extrapolation bound (one interval per bucket)
                assert abs(sum(per["scrape"]) - sum(per["prometheus"])) <= (n + 2) * bound + lost, (field, pool)
        # restarts were seen and counted, by both sources
        for rows in (by_scrape, by_prom):
            restarts = sum(v[-1] or 0 for k, v in rows.items() if k[1:3] == ("chat", "eagle3"))
            assert restarts >= 2
            assert all(not v[-1] for k, v in rows.items() if k[1:3] == ("chat", "off"))
    finally:
        stop.set()
        sim.stop()
        for name, _ in dbs:
            dbsupport.drop_database(pg_admin_url, name)

