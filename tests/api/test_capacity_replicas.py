"""The replica count behind costs along a pool's history (hand-computed): configured until the pool's first
per-replica row, observed from then on, time bin by time bin; the window that holds the change says so."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import replica_repo
from backend.domain import capacity as cap
from backend.services import capacity as svc
from backend.services.windows import Range
from tests.api.test_capacity_api import _client, seeded  # noqa: F401  (seeded: a fixture)

# 3.00 a GPU-hour x 2 GPUs = 6.00 a replica-hour; 2 replicas configured for every pool
SETTINGS = {"gpu_hour_price": {"acme-70b": 3.0}, "gpus_per_replica": {"*": 2}, "pool_replicas": {"acme-70b": {"*": 2}}}


def _one_replica_from(db: Session, now: datetime, since: datetime) -> None:
    """The spec pool's per-replica rows: one replica, 10-minute rows from `since` to `now`."""
    spec = {p.spec_mode: p for p in replica_repo.model_pools(db, "acme-70b")}["eagle3"]
    ids = replica_repo.upsert_replicas(db, {(spec.id, "r0", "0"): (since, now, {})})
    n = int((now - since).total_seconds() // 600)
    replica_repo.upsert_buckets(db, [
        {"replica_id": ids[(spec.id, "r0", "0")], "bucket_start": since + timedelta(minutes=10 * i),
         **dict.fromkeys(replica_repo.BUCKET_COLUMNS), "bucket_seconds": 600} for i in range(n)])
    db.flush()


def test_replica_history_per_bin() -> None:
    h = cap.ReplicaHistory(observed=1.0, configured=2.0, observed_from=1000.0)
    assert h.at(900, 960) == 2.0 and h.at(940, 1000) == 2.0  # before the first replica row: configured
    assert h.at(1000, 1060) == 1.0  # from it on: observed
    assert h.at(970, 1030) == 1.5  # a bin straddling it: half each
    assert h.changes_in(0, 2000) and not h.changes_in(1000, 2000) and not h.changes_in(0, 1000)
    assert cap.ReplicaHistory(observed=1.0, configured=None, observed_from=1000.0).at(900, 960) == 1.0  # no hole
    assert cap.ReplicaHistory(observed=None, configured=2.0).at(0, 60) == 2.0
    assert cap.ReplicaHistory(observed=None, configured=None).at(0, 60) is None


def test_first_replica_row_does_not_reprice_the_hours_before_it(seeded, now) -> None:  # noqa: F811
    """seeded: spec 3,000 tokens a minute for 30 min, then 1,200 (126,000 in the hour). Replica rows (1 replica)
    from minute 30. Spec replica-seconds: 2 x 1,800 + 1 x 1,800 = 5,400 (1.5 replica-hours, mean 1.5 replicas);
    cost per 1 M = 6.00 x 1.5 / 126,000 x 1e6 = 71.43. (One count for the hour, the observed 1, gave 47.62.)"""
    start = now - timedelta(hours=1)
    half = start + timedelta(minutes=30)
    _one_replica_from(seeded, now, half)
    s = Settings(_env_file=None, **SETTINGS)
    hour = svc.capacity(seeded, model_name="acme-70b", rng=Range(start, now), now=now, settings=s)
    (chat,) = hour.classes
    assert chat.replicas_source == "mixed"
    assert chat.replicas_spec == 1.5 and chat.spec.replicas == 1.5 and chat.replicas_baseline == 2.0
    assert chat.spec.per_replica == pytest.approx(126_000 / 5_400)
    assert chat.spec.cost_per_mtok == pytest.approx(6.0 * 1.5 / 126_000 * 1e6)
    assert chat.baseline.cost_per_mtok == pytest.approx(6.0 * 2 / 90_000 * 1e6)  # baseline: 2 configured throughout
    assert chat.replicas_note is not None and "2 configured until" in chat.replicas_note
    assert "1.00 observed from then on" in chat.replicas_note and chat.replicas_note in chat.note
    # the halves: configured 2 before, observed 1 after, each without a change inside (no note); their
    # replica-hours add up to the hour's: no jump
    first = svc.capacity(seeded, model_name="acme-70b", rng=Range(start, half), now=now, settings=s).classes[0]
    second = svc.capacity(seeded, model_name="acme-70b", rng=Range(half, now), now=now, settings=s).classes[0]
    assert (first.replicas_source, first.replicas_spec, first.replicas_note) == ("configured", 2.0, None)
    # (the class reads "observed" only when both sides are: the baseline's 2 stay configured)
    assert (second.replicas_source, second.replicas_spec, second.replicas_note) == ("configured", 1.0, None)
    assert first.spec.cost_per_mtok == pytest.approx(6.0 * 1.0 / 90_000 * 1e6)  # 2 replicas x 0.5 h
    assert second.spec.cost_per_mtok == pytest.approx(6.0 * 0.5 / 36_000 * 1e6)  # 1 replica x 0.5 h
    hours = lambda c: c.spec.cost_per_mtok * c.spec.tokens / 1e6 / 6.0  # replica-hours back from the cost
    assert hours(first) + hours(second) == pytest.approx(hours(chat)) == pytest.approx(1.5)


def test_window_without_the_replica_rows_the_pool_had_says_so(seeded, now) -> None:  # noqa: F811
    start = now - timedelta(hours=1)
    spec = {p.spec_mode: p for p in replica_repo.model_pools(seeded, "acme-70b")}["eagle3"]
    ids = replica_repo.upsert_replicas(seeded, {(spec.id, "r0", "0"): (start - timedelta(hours=1), start, {})})
    replica_repo.upsert_buckets(seeded, [{"replica_id": ids[(spec.id, "r0", "0")],
                                          "bucket_start": start - timedelta(minutes=10),
                                          **dict.fromkeys(replica_repo.BUCKET_COLUMNS), "bucket_seconds": 600}])
    seeded.flush()
    body = _client(seeded, now, **SETTINGS).get("/api/v1/capacity", params={"model": "acme-70b", "window": "1h"})
    (chat,) = body.json()["classes"]
    assert chat["replicas_source"] == "configured" and chat["replicas_spec"] == 2.0
    assert chat["replicas_note"].startswith("no per-replica rows in this window (the pool's last ended ")
    assert "the configured 2 replicas are used" in chat["note"]
