"""The faster write path changes nothing: the validation fast path decides exactly as the full rules, and
the binary COPY with hand-encoded float arrays stores every value bit for bit."""

from __future__ import annotations

import copy
import math
import random
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from backend.db import repositories as repo
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.domain import quality
from backend.domain.records import BucketRecord, ConfigSeen, Histogram, PoolKey, PoolSeen

BOUNDS = (0.01, 0.025, 0.05, 0.1)


def _record(rng: random.Random) -> BucketRecord:
    n = rng.uniform(50, 500)
    pp = sorted((rng.uniform(0, n) for _ in range(3)), reverse=True)
    counts, acc = [], 0.0
    for _ in range(len(BOUNDS) + 1):
        acc += rng.uniform(0, 30)
        counts.append(acc)
    return BucketRecord(pool=PoolKey("m", "c", "eagle3"), bucket_start=0, drafts=n, draft_tokens=3 * n,
                        accepted_tokens=math.fsum(pp), accepted_per_pos=pp,
                        itl=Histogram(BOUNDS, counts, sum=acc * 0.03, count=acc), generation_tokens=n * 2,
                        running_mean=rng.uniform(0, 40))


MUTATIONS = [
    lambda r, g: None,
    lambda r, g: setattr(r, "drafts", -g.uniform(0, 1e-7)),  # inside the tolerance
    lambda r, g: setattr(r, "drafts", -1.0),
    lambda r, g: setattr(r, "accepted_tokens", r.accepted_tokens * (1 + g.choice([1e-12, 1e-7, 1e-3]))),
    lambda r, g: setattr(r, "accepted_tokens", math.nan),
    lambda r, g: r.accepted_per_pos.__setitem__(2, r.accepted_per_pos[1] * (1 + g.choice([1e-12, 1e-3]))),
    lambda r, g: setattr(r, "draft_tokens", r.drafts * (1 - g.choice([1e-12, 1e-3]))),
    lambda r, g: r.itl.counts.__setitem__(2, r.itl.counts[1] * (1 - g.choice([1e-12, 1e-3]))),
    lambda r, g: setattr(r.itl, "count", r.itl.counts[-1] + g.choice([1e-9, 1e-5])),
    lambda r, g: setattr(r.itl, "sum", math.inf),
    lambda r, g: setattr(r, "itl", Histogram(BOUNDS, [1.0, 2.0], sum=1.0, count=2.0)),
    lambda r, g: setattr(r, "running_mean", math.inf),
]


def test_fast_validation_decides_exactly_as_the_full_rules(monkeypatch) -> None:
    rng = random.Random(7)
    for i in range(3000):
        rec = _record(rng)
        MUTATIONS[i % len(MUTATIONS)](rec, rng)
        fast = copy.deepcopy(rec)
        got = quality.validate(fast)
        full = copy.deepcopy(rec)
        with monkeypatch.context() as m:
            m.setattr(quality, "_clean", lambda r: False)
            want = quality.validate(full)
        assert got == want and fast == full, (i, rec)


@pytest.fixture
def factory(fresh_db_url: str):
    engine = make_engine(fresh_db_url)
    yield make_sessionmaker(engine)
    engine.dispose()


def test_copy_stores_values_exactly(factory) -> None:
    rng = random.Random(3)
    start = datetime(2026, 11, 30, 23, 58, tzinfo=UTC)  # two days: a partition made on demand
    with session_scope(factory) as s:
        pid = repo.upsert_pools(s, {PoolKey("m", "c", "eagle3"): PoolSeen(start, start, 60, (ConfigSeen(start, 3),))})[PoolKey("m", "c", "eagle3")]
        layout = repo.layout_ids(s, [BOUNDS])[BOUNDS]
        rows = []
        for i in range(5):
            row = {c: None for c in repo.FACT_COLUMNS}
            row |= {"pool_id": pid, "bucket_start": start + timedelta(minutes=i), "bucket_seconds": 60,
                    "source": "prometheus\tx", "collected_at": start, "drafts": rng.random() * 1e6,
                    "accepted_tokens": 1 / 3, "itl_layout_id": layout, "restarts": 2,
                    "itl_buckets": [rng.random() / 7 for _ in range(5)], "accepted_per_pos": [0.1, 1e-300, 5e300]}
            rows.append(row)
        rows[3]["accepted_per_pos"] = [1, None, 2.5]
        rows[4]["accepted_per_pos"] = []
        assert repo.upsert_buckets(s, rows) == 5
    with factory() as s:
        back = s.execute(text("SELECT drafts, accepted_tokens, itl_buckets, accepted_per_pos, source, restarts "
                              "FROM pool_buckets ORDER BY bucket_start")).all()
    assert [tuple(b) for b in back] == [(r["drafts"], 1 / 3, r["itl_buckets"], r["accepted_per_pos"], "prometheus\tx", 2)
                                        for r in rows]
