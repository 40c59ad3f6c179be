"""Collection keeps a pool's K history: a changed num_speculative_tokens becomes a config_changes row (the
pool row itself only holds the current K); the same K again, or a pool seen for the first time, adds none."""

from __future__ import annotations

from datetime import timedelta

from backend.db import config_repo
from backend.db.repositories import upsert_pools
from backend.domain.records import PoolKey
from tests.factories import T0

KEY = PoolKey("llama-70b", "chat", "eagle3")


def test_a_k_change_is_recorded_once(db):
    t1, t2, t3 = T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    ids = upsert_pools(db, {KEY: (t1, t1 + timedelta(minutes=1), 3)})
    upsert_pools(db, {KEY: (t2, t2 + timedelta(minutes=1), 3)})  # unchanged
    assert config_repo.changes(db, start=T0 - timedelta(days=1), end=T0 + timedelta(days=1)) == []
    upsert_pools(db, {KEY: (t3, t3 + timedelta(minutes=1), 4)})
    upsert_pools(db, {KEY: (t3, t3 + timedelta(minutes=1), 4)})  # a re-run of the same cycle
    upsert_pools(db, {KEY: (t3 + timedelta(minutes=1), t3 + timedelta(minutes=2), None)})  # K not reported
    rows = config_repo.changes(db, start=T0 - timedelta(days=1), end=T0 + timedelta(days=1), model_name="llama-70b")
    assert [(r.pool_id, r.at, r.field, r.old_value, r.new_value, r.source) for r in rows] == [
        (ids[KEY], t3, "num_spec_tokens", "3", "4", "collection")]
    assert config_repo.changes(db, start=t3 + timedelta(seconds=1), end=T0 + timedelta(days=1)) == []
