"""Per-request ingest on real Postgres: duplicates inside a batch and across batches, identical batches
posted concurrently (committed by separate transactions), and exactly one copy of each record's counts in
the bucket sums; a deleted pool takes its records with it."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from sqlalchemy import text

from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.services import request_ingest
from tests.api.test_per_request_ingest import record
from tests.support.deadline import deadline


def _sums(session) -> tuple:
    return tuple(session.execute(text(
        "SELECT sum(b.drafts), sum(b.draft_tokens), sum(b.accepted_tokens), sum(b.finished_requests), "
        "sum(b.generation_tokens), count(*) FROM pool_buckets b JOIN pools p ON p.id = b.pool_id "
        "WHERE p.origin = 'requests'")).one())


def _per_pos(session) -> list:
    return session.execute(text(
        "SELECT b.accepted_per_pos FROM pool_buckets b JOIN pools p ON p.id = b.pool_id "
        "WHERE p.origin = 'requests' AND p.traffic_class = 'chat'")).scalar_one()


def test_duplicates_inside_and_across_batches(db, now: datetime) -> None:
    settings = Settings(_env_file=None)
    a = record("a", [1, 2, 3, 4], now=now)                    # N 10, D 30, A 20
    b = record("b", [0, 1, 0, 1], now=now, output=40)          # N 2, D 6, A 4
    a_changed = record("a", [9, 0, 0, 0], now=now, output=5)  # the same id with other counts: the first wins
    r = request_ingest.ingest(db, [a, b, a_changed, b], settings=settings, now=now)
    assert (r.received, r.stored, r.duplicates, r.refused) == (4, 2, 2, 0)
    assert _sums(db) == (12, 36, 24, 2, 140, 1)
    assert _per_pos(db) == [9 + 2, 7 + 1, 4 + 1]  # P_i = sum of h_j, j > i: a [9, 7, 4], b [2, 1, 1]
    # across batches: the stored ids add nothing, the new one adds only itself
    c = record("c", [2, 0, 0, 0], now=now, output=2)
    r = request_ingest.ingest(db, [b, c, a, c], settings=settings, now=now)
    assert (r.stored, r.duplicates, r.buckets) == (1, 3, 1)
    assert _sums(db) == (14, 42, 24, 3, 142, 1)
    assert _per_pos(db) == [11, 8, 5]  # c accepted nothing
    # a refused copy of a stored id is counted as refused, not as a duplicate, and changes nothing
    bad = record("a", [1, 1, 1, 1], now=now, drafted=1)
    r = request_ingest.ingest(db, [bad], settings=settings, now=now)
    assert (r.stored, r.duplicates, r.refused, r.refused_by_rule) == (0, 0, 1, {"accepted_gt_drafted": 1})
    assert _sums(db) == (14, 42, 24, 3, 142, 1)


def test_concurrent_identical_batches_add_nothing_twice(fresh_db_url: str, now: datetime) -> None:
    settings = Settings(_env_file=None, database_url=fresh_db_url)
    batch = [record(f"r{i}", [i % 3, 1, i % 2, 2], now=now, ago=30 + 7 * i, cls=("chat", "code")[i % 2],
                    output=50 + i) for i in range(300)]
    engine = make_engine(fresh_db_url)
    factory = make_sessionmaker(engine)
    posts = 4
    barrier = threading.Barrier(posts)
    reports: list[request_ingest.IngestReport] = []
    errors: list[BaseException] = []

    def post() -> None:
        try:
            barrier.wait()
            with session_scope(factory) as s:
                reports.append(request_ingest.ingest(s, [dict(x) for x in batch], settings=settings, now=now))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=post) for _ in range(posts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(deadline(120))
    assert not any(t.is_alive() for t in threads), "an ingest hung (a lock wait that never ends)"
    assert not errors, errors
    assert len(reports) == posts
    assert sorted(r.stored for r in reports) == [0] * (posts - 1) + [300]
    assert sum(r.duplicates for r in reports) == 300 * (posts - 1)
    hist = [[i % 3, 1, i % 2, 2] for i in range(300)]
    with session_scope(factory) as s:
        assert s.execute(text("SELECT count(*) FROM request_records")).scalar_one() == 300
        steps = sum(sum(h) for h in hist)
        accepted = sum(h[1] + 2 * h[2] + 3 * h[3] for h in hist)
        assert _sums(s)[:5] == (steps, 3 * steps, accepted, 300, sum(50 + i for i in range(300)))
    engine.dispose()


def test_a_deleted_pool_takes_its_records(db, now: datetime) -> None:
    settings = Settings(_env_file=None)
    request_ingest.ingest(db, [record("x", [1, 1], now=now), record("y", [1, 1], now=now, cls="code")], settings=settings,
                          now=now)
    db.execute(text("DELETE FROM pools WHERE traffic_class = 'chat' AND origin = 'requests'"))
    assert db.execute(text("SELECT request_id FROM request_records")).scalars().all() == ["y"]


def test_finish_times_keep_their_microseconds_and_bucket(db, now: datetime) -> None:
    settings = Settings(_env_file=None)
    edge = now.replace(second=0, microsecond=0) - timedelta(minutes=2)  # exactly on a bucket edge
    recs = [record("edge", [1, 1], now=now), record("after", [1, 1], now=now)]
    recs[0]["finish_time"] = edge.isoformat()
    recs[1]["finish_time"] = (edge + timedelta(microseconds=1)).timestamp()
    request_ingest.ingest(db, recs, settings=settings, now=now)
    rows = dict(db.execute(text("SELECT request_id, finish_time FROM request_records")).all())
    assert rows == {"edge": edge, "after": edge + timedelta(microseconds=1)}
    starts = db.execute(text("SELECT bucket_start FROM pool_buckets ORDER BY 1")).scalars().all()
    # bucket (start, start + 60 s]: the edge closes the bucket before it, a microsecond later opens the next
    assert starts == [edge - timedelta(minutes=1), edge]
