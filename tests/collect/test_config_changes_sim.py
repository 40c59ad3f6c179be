"""Collection finds a change of drafter and of vLLM version on simulated traffic (the scrape path, real
Postgres): the deployment labels the pools' series `drafter` and `vllm_version` (the simulator's
config_labels, as relabeling would), and each change is dated at the bucket holding it; back-filling an
older range, where the pool ran the old drafter and version, records nothing and leaves the pool's current
values alone."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from backend.config import Settings
from backend.db import config_repo
from backend.db.models import Pool
from backend.services.history import seed_history
from tests.support.stack import factory_for

END = 1_796_040_000  # a multiple of 60
SECONDS = 3600
MODEL = "m-70b"
SCENARIO = {
    "name": "upgrades", "tick": 1.0, "config_labels": True,
    "defaults": {"model": MODEL, "concurrency": 8},
    "pools": [{"id": "chat-eagle3", "traffic_class": "chat", "spec_mode": "eagle3", "k": 3, "drafter": "EAGLE-3",
               "vllm_version": "0.11.0", "acceptance": {"mode": "iid", "a": 0.6}},
              {"id": "chat-off", "traffic_class": "chat", "spec_mode": "off", "vllm_version": "0.11.0"}],
    "events": [{"at": 1800, "pool": "chat-eagle3", "drafter": "EAGLE-3.1", "acceptance": {"mode": "iid", "a": 0.7}},
               {"at": 2700, "pool": "*", "restart": True, "vllm_version": "0.12.0"}],
}


def _changes(factory) -> list[tuple]:
    with factory() as session:
        rows = config_repo.changes(session, start=datetime.fromtimestamp(0, UTC),
                                   end=datetime.fromtimestamp(END + SECONDS, UTC))
        return [(r.at.timestamp(), r.spec_mode, r.field, r.old_value, r.new_value, r.source) for r in rows]


def _current(factory) -> dict:
    with factory() as session:
        return {m: (k, d, v) for m, k, d, v in session.execute(
            select(Pool.spec_mode, Pool.num_spec_tokens, Pool.drafter, Pool.vllm_version))}


def test_drafter_and_version_changes_are_found_and_dated(fresh_db_url):
    factory = factory_for(fresh_db_url)
    s = Settings(_env_file=None, database_url=fresh_db_url, bucket_seconds=60)
    seed_history(factory, s, scenario=SCENARIO, seconds=SECONDS, end=END, seed=3)
    start = END - SECONDS
    # the simulator's clock starts one scrape (15 s) before `start`: the drafter changes at start + 1785 s
    # (bucket start + 1740 .. start + 1800), the version at start + 2685 s (bucket start + 2640 .. + 2700)
    expected = [(start + 1740, "eagle3", "drafter", "EAGLE-3", "EAGLE-3.1", "collection"),
                (start + 2640, "eagle3", "vllm_version", "0.11.0", "0.12.0", "collection"),
                (start + 2640, "off", "vllm_version", "0.11.0", "0.12.0", "collection")]
    assert _changes(factory) == expected
    assert _current(factory) == {"eagle3": (3, "EAGLE-3.1", "0.12.0"), "off": (None, None, "0.12.0")}

    # the hour before, back-filled afterwards: the same scenario (old drafter, then its changes) is older
    # than every stored bucket, so it is history, not news
    seed_history(factory, s, scenario=SCENARIO, seconds=SECONDS, end=start, seed=4)
    assert _changes(factory) == expected
    assert _current(factory) == {"eagle3": (3, "EAGLE-3.1", "0.12.0"), "off": (None, None, "0.12.0")}
    # and the same hour collected again (up to the latest stored bucket, the same values) changes nothing
    seed_history(factory, s, scenario=SCENARIO, seconds=SECONDS, end=END, seed=3)
    assert _changes(factory) == expected
    assert _current(factory) == {"eagle3": (3, "EAGLE-3.1", "0.12.0"), "off": (None, None, "0.12.0")}
