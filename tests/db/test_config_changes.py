"""Collection keeps a pool's configuration history: a changed K (num_speculative_tokens), drafter or vLLM
version becomes a config_changes row dated at the first bucket that reported it (the pool row holds the
current values); the same values again, a pool seen for the first time, or a re-collection / back-fill of
an older range (whatever it ran then) add none and never move the current value back."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from backend.db import config_repo
from backend.db.models import Pool
from backend.db.repositories import upsert_pools
from backend.domain.records import ConfigSeen, PoolKey, PoolSeen
from tests.factories import T0

KEY = PoolKey("llama-70b", "chat", "eagle3")
W = 60
M = timedelta(seconds=W)
DAY = timedelta(days=1)


def seen(*buckets: tuple) -> dict[PoolKey, PoolSeen]:
    """buckets: (start, K, drafter, version) in time order."""
    config = tuple(ConfigSeen(*b) for b in buckets)
    return {KEY: PoolSeen(config[0].start, config[-1].start + M, W, config)}


def history(db) -> list[tuple]:
    return [(r.at, r.field, r.old_value, r.new_value, r.source)
            for r in config_repo.changes(db, start=T0 - DAY, end=T0 + DAY, model_name="llama-70b")]


def current(db) -> tuple:
    return db.execute(select(Pool.num_spec_tokens, Pool.drafter, Pool.vllm_version)).one()


def test_a_k_change_is_recorded_once(db):
    t1, t2, t3 = T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    ids = upsert_pools(db, seen((t1, 3)))
    upsert_pools(db, seen((t2, 3)))  # unchanged
    assert history(db) == []
    upsert_pools(db, seen((t3, 4)))
    upsert_pools(db, seen((t3, 4)))  # a re-run of the same cycle
    upsert_pools(db, seen((t3 + M, None)))  # K not reported
    rows = config_repo.changes(db, start=T0 - DAY, end=T0 + DAY, model_name="llama-70b")
    assert [(r.pool_id, r.at, r.field, r.old_value, r.new_value, r.source) for r in rows] == [
        (ids[KEY], t3, "num_spec_tokens", "3", "4", "collection")]
    assert config_repo.changes(db, start=t3 + timedelta(seconds=1), end=T0 + DAY) == []
    assert current(db) == (4, None, None)


def test_drafter_and_version_changes_are_dated_at_their_bucket(db):
    # one batch of five buckets: the drafter changes in the third, the vLLM version in the fifth
    upsert_pools(db, seen((T0, 3, "EAGLE-3", "0.11.0"), (T0 + M, 3, "EAGLE-3", "0.11.0")))
    upsert_pools(db, seen((T0 + M, 3, "EAGLE-3", "0.11.0"), (T0 + 2 * M, 3, "EAGLE-3.1", "0.11.0"),
                          (T0 + 3 * M, 3, "EAGLE-3.1", "0.11.0"), (T0 + 4 * M, 3, "EAGLE-3.1", "0.12.0")))
    assert history(db) == [(T0 + 2 * M, "drafter", "EAGLE-3", "EAGLE-3.1", "collection"),
                           (T0 + 4 * M, "vllm_version", "0.11.0", "0.12.0", "collection")]
    assert current(db) == (3, "EAGLE-3.1", "0.12.0")


def test_an_older_range_changes_nothing(db):
    upsert_pools(db, seen((T0 + 10 * M, 4, "EAGLE-3.1", "0.12.0"), (T0 + 11 * M, 4, "EAGLE-3.1", "0.12.0")))
    # a back-fill of the hour before, when the pool ran K=3, the old drafter and version
    upsert_pools(db, seen(*[(T0 - 60 * M + i * M, 3, "EAGLE-3", "0.11.0") for i in range(60)]))
    # a re-collection overlapping the latest stored bucket, same values
    upsert_pools(db, seen((T0 + 9 * M, 3, "EAGLE-3", "0.11.0"), (T0 + 11 * M, 4, "EAGLE-3.1", "0.12.0")))
    assert history(db) == []
    assert current(db) == (4, "EAGLE-3.1", "0.12.0")
    # the latest stored bucket re-collected with a new K (it changed within that bucket) counts
    upsert_pools(db, seen((T0 + 11 * M, 5, "EAGLE-3.1", "0.12.0")))
    assert history(db) == [(T0 + 11 * M, "num_spec_tokens", "4", "5", "collection")]
    assert current(db) == (5, "EAGLE-3.1", "0.12.0")


def test_labels_first_seen_on_a_known_pool_are_no_change(db):
    upsert_pools(db, seen((T0, 3)))  # a pool collected before the deployment labelled its drafter
    upsert_pools(db, seen((T0 + M, 3, "EAGLE-3", "0.11.0")))
    assert history(db) == []
    assert current(db) == (3, "EAGLE-3", "0.11.0")
