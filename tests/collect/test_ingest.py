"""write_records on the real, migrated Postgres: what is stored, what is refused, and re-runs."""

import math

import pytest
from sqlalchemy import func, select

from backend.db.models import HistogramLayout, Pool, PoolBucket, Rejection
from backend.domain.records import BucketRecord, Histogram, PoolKey
from backend.services.ingest import write_records

CHAT = PoolKey("llama", "chat", "eagle3")
BOUNDS = (0.01, 0.025, 0.05)
T0 = 1_796_000_000 - 1_796_000_000 % 60


def rec(start=T0, pool=CHAT, **kw):
    base = {"pool": pool, "bucket_start": start, "drafts": 100.0, "draft_tokens": 300.0, "accepted_tokens": 180.0,
                "accepted_per_pos": [80.0, 60.0, 40.0],
                "itl": Histogram(BOUNDS, [10.0, 50.0, 90.0, 100.0], sum=3.0, count=100.0),
                "generation_tokens": 280.0, "running_mean": 12.0}
    base.update(kw)
    return BucketRecord(**base)


def facts(db):
    return db.execute(select(PoolBucket).order_by(PoolBucket.bucket_start)).scalars().all()


def test_clean_records_are_stored_as_increases(db, now):
    res = write_records(db, [rec(), rec(T0 + 60, drafts=50.0, draft_tokens=150.0, accepted_tokens=90.0,
                                        accepted_per_pos=[40.0, 30.0, 20.0])], width=60, source="prometheus",
                        now=now)
    assert (res.rows, res.rejected, res.pools) == (2, 0, 1)
    rows = facts(db)
    assert [r.accepted_tokens for r in rows] == [180.0, 90.0]
    assert rows[0].accepted_per_pos == [80.0, 60.0, 40.0]
    assert rows[0].itl_buckets == [10.0, 50.0, 90.0, 100.0]
    layout = db.get(HistogramLayout, rows[0].itl_layout_id)
    assert layout.bounds == list(BOUNDS)
    pool = db.execute(select(Pool)).scalar_one()
    assert pool.num_spec_tokens == 3
    assert pool.last_seen.timestamp() == T0 + 120 and pool.first_seen.timestamp() == T0


def test_rerun_rewrites_the_same_rows(db, now):
    for _ in range(2):
        write_records(db, [rec(), rec(accepted_tokens=math.nan)], width=60, source="prometheus", now=now)
    assert db.execute(select(func.count()).select_from(PoolBucket)).scalar() == 1
    assert db.execute(select(func.count()).select_from(Rejection)).scalar() == 1


@pytest.mark.parametrize(
    "change, rule",
    [
        ({"accepted_tokens": math.nan}, "not_finite"),
        ({"drafts": -1.0}, "negative_increase"),
        ({"accepted_tokens": 400.0, "accepted_per_pos": [100.0, 100.0, 100.0]}, "accepted_gt_drafted"),
        ({"accepted_per_pos": [40.0, 80.0, 60.0]}, "per_position_increasing"),
        ({"accepted_per_pos": [140.0, 30.0, 10.0]}, "per_position_gt_drafts"),
    ],
)
def test_impossible_spec_data_is_refused_and_nothing_of_it_stored(db, now, change, rule):
    # a record with nothing but spec-decode data: nothing may be stored at all
    bad = BucketRecord(pool=CHAT, bucket_start=T0, **{"drafts": 100.0, "draft_tokens": 300.0,
                       "accepted_tokens": 180.0, "accepted_per_pos": [80.0, 60.0, 40.0], **change})
    res = write_records(db, [bad], width=60, source="scrape", now=now)
    assert res.rows == 0 and res.rejected >= 1
    assert facts(db) == []
    rules = db.execute(select(Rejection.rule, Rejection.model_name, Rejection.spec_mode)).all()
    assert (rule, "llama", "eagle3") in rules


def test_refused_histogram_leaves_the_rest_of_the_bucket(db, now):
    bad = rec(itl=Histogram(BOUNDS, [10.0, 5.0, 90.0, 100.0], sum=3.0, count=100.0))
    write_records(db, [bad], width=60, source="prometheus", now=now)
    (row,) = facts(db)
    assert row.itl_buckets is None and row.itl_count is None
    assert row.accepted_tokens == 180.0
    assert db.execute(select(Rejection.rule)).scalars().all() == ["histogram_not_monotone"]
