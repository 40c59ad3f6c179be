"""The Prometheus source finds a drafter change (real Prometheus scraping the simulator, real Postgres): the
deployment labels the series `drafter` (the simulator's config_labels); the change is dated at the bucket
holding the first sample with the new label, and a second back-fill of the same range adds nothing."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

import pytest

from backend.config import Settings
from backend.db import config_repo
from backend.prom.client import PromClient
from backend.services.collect import run_prometheus
from backend.services.collect_chunks import latest_complete_end
from backend.sim.server import start_in_thread
from tests.support.stack import factory_for

pytestmark = pytest.mark.prometheus
WIDTH = 5
CHANGE_AT = 20.0  # simulated (= wall, time_scale 1) seconds after the simulator's start
SCENARIO = {
    "name": "drafter-change", "tick": 0.5, "config_labels": True,
    "defaults": {"model": "m-8b", "concurrency": 4},
    "pools": [{"id": "chat-eagle3", "traffic_class": "chat", "spec_mode": "eagle3", "k": 2, "drafter": "EAGLE-3",
               "acceptance": {"mode": "iid", "a": 0.6}}],
    "events": [{"at": CHANGE_AT, "pool": "chat-eagle3", "drafter": "EAGLE-3.1",
                "acceptance": {"mode": "iid", "a": 0.7}}],
}


def test_a_drafter_change_is_dated_at_its_bucket(prometheus_factory, fresh_db_url):
    sim = start_in_thread(SCENARIO, seed=5)
    try:
        prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="1s")
        prom.wait_for_samples('vllm:num_requests_running{drafter="EAGLE-3.1"}', timeout=600)
        client = PromClient(prom.url)
        new = client.query_raw('vllm:num_requests_running{drafter="EAGLE-3.1"}', time.time(), 600)
        first_new = min(t for s in new for t, _v in s.points)
        # two buckets past the one holding the first new sample are complete
        end = latest_complete_end(first_new, WIDTH, 0) + 3 * WIDTH
        prom.wait_for_samples("vllm:num_requests_running", at=end + 2)
        time.sleep(max(0.0, end + 2.1 - time.time()))
        s = Settings(_env_file=None, database_url=fresh_db_url, prometheus_url=prom.url, bucket_seconds=WIDTH,
                     settle_seconds=2, replica_bucket_seconds=WIDTH)
        since = datetime.fromtimestamp(sim.sim.start, UTC)
        factory = factory_for(fresh_db_url)
        for _ in range(2):  # the same range twice: a re-collection records nothing more
            run_prometheus(factory, client, s, now=datetime.fromtimestamp(end + 2.1, UTC), since=since,
                           kind="backfill")
        with factory() as session:
            rows = config_repo.changes(session, start=since, end=datetime.fromtimestamp(end + 60, UTC))
        bucket = math.ceil(first_new / WIDTH) * WIDTH - WIDTH  # the bucket (b, b + WIDTH] of the first new sample
        assert [(r.at.timestamp(), r.field, r.old_value, r.new_value, r.source) for r in rows] == [
            (bucket, "drafter", "EAGLE-3", "EAGLE-3.1", "collection")]
        assert sim.sim.start + CHANGE_AT <= first_new
    finally:
        sim.stop()
