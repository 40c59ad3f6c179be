"""Replica rows: coarsened from collection buckets, validated like the pool rows (bad data refused with a
rejection row, nothing stored), idempotent; the replicas API (values, bounds, 404, 422); the Prometheus
adapter's replica queries (a fixed number, whatever the number of replicas)."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from backend.config import Settings
from backend.db.models import Rejection
from backend.db.models_replicas import Replica, ReplicaBucket
from backend.domain.records import BucketRecord, Histogram, PoolKey, ReplicaKey
from backend.prom.client import SeriesPoints
from backend.services import collect
from backend.services.ingest import write_records
from backend.services.replicas import write_replicas

POOL = PoolKey("m/one", "chat", "eagle3")
BOUNDS = (0.01, 0.02, 0.05)


def _fine(start: float, *, drafts: float, draft_tokens: float, accepted: float, tpot: list[float] | None = None,
          per_pos: list[float] | None = None) -> BucketRecord:
    return BucketRecord(pool=POOL, bucket_start=start, drafts=drafts, draft_tokens=draft_tokens, accepted_tokens=accepted,
                        accepted_per_pos=per_pos,
                        tpot=Histogram(BOUNDS, tpot, None, tpot[-1]) if tpot is not None else None)


def _seed(db, now, *, replicas: dict[ReplicaKey, list[BucketRecord]], grain: int = 600) -> list[int]:
    """Pool rows (the replicas' sums per minute) and the replica rows of the coarse buckets ending at `ends`."""
    t0 = now.timestamp() - now.timestamp() % grain - 2 * grain
    fine = [(k, r) for k, recs in replicas.items() for r in recs]
    for _k, r in fine:
        r.bucket_start += t0
    pool_rec = BucketRecord(pool=POOL, bucket_start=t0, drafts=1.0, draft_tokens=3.0, accepted_tokens=1.0)
    write_records(db, [pool_rec], width=60, source="scrape", now=now)
    ends = [int(t0) + grain, int(t0) + 2 * grain]
    write_replicas(db, fine, grain=grain, ends=ends, source="scrape", now=now)
    db.flush()
    return ends


GOOD = {ReplicaKey("r0", "0"): [_fine(0, drafts=50, draft_tokens=150, accepted=120, tpot=[5, 25, 49, 50]),
                                 _fine(60, drafts=50, draft_tokens=150, accepted=120, tpot=[5, 25, 50, 50])],
        ReplicaKey("r1", "0"): [_fine(600, drafts=100, draft_tokens=300, accepted=120)]}


def _fresh(recs):
    return {k: [BucketRecord(**{**r.__dict__, "tpot": Histogram(r.tpot.bounds, list(r.tpot.counts), r.tpot.sum,
                                                                 r.tpot.count) if r.tpot else None,
                                "flags": [], "dips": {}}) for r in v] for k, v in recs.items()}


def test_replica_rows_are_coarse_sums_and_a_rerun_rewrites_them(db, now):
    _seed(db, now, replicas=_fresh(GOOD))
    rows = {(rep.instance, b.bucket_start): b for b, rep in
            db.execute(select(ReplicaBucket, Replica).join(Replica, Replica.id == ReplicaBucket.replica_id))}
    assert len(rows) == 2
    r0 = next(b for (i, _s), b in rows.items() if i == "r0")
    assert (r0.drafts, r0.draft_tokens, r0.accepted_tokens, r0.bucket_seconds) == (100, 300, 240, 600)
    assert r0.tpot_buckets == [10, 50, 99, 100] and r0.tpot_count == 100
    _seed(db, now, replicas=_fresh(GOOD))  # the same coarse buckets again
    assert db.scalar(select(func.count()).select_from(ReplicaBucket)) == 2
    assert db.scalar(select(func.count()).select_from(Replica)) == 2


@pytest.mark.parametrize(("bad", "rule"), [
    (_fine(0, drafts=10, draft_tokens=30, accepted=31), "replica_accepted_gt_drafted"),
    (_fine(0, drafts=10, draft_tokens=math.nan, accepted=3), "replica_not_finite"),
    (_fine(0, drafts=-4, draft_tokens=30, accepted=3), "replica_negative_increase"),
])
def test_impossible_replica_data_is_refused_with_a_rejection_row(db, now, bad, rule):
    # one bad minute among good ones: the replica's spec-decode group is refused for its whole coarse bucket
    recs = {ReplicaKey("r9", ""): [bad, _fine(60, drafts=10, draft_tokens=30, accepted=20)]}
    _seed(db, now, replicas=recs)
    row = db.scalar(select(ReplicaBucket))
    assert row is None or (row.drafts, row.draft_tokens, row.accepted_tokens) == (None, None, None)
    rej = list(db.scalars(select(Rejection).where(Rejection.rule == rule)))
    assert len(rej) == 1 and "replica r9" in rej[0].detail and rej[0].model_name == POOL.model_name


def test_replicas_api_gives_pooled_values_per_replica(client, db, now):
    ends = _seed(db, now, replicas=_fresh(GOOD))
    r = client.get("/api/v1/models/m/one/replicas", params={"window": "20m"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["bucket_seconds"] == 600 and body["window_seconds"] == 1200
    assert body["window_end"].startswith(now.__class__.fromtimestamp(ends[-1], now.tzinfo).isoformat()[:19])
    (pool,) = body["pools"]
    assert pool["traffic_class"] == "chat" and pool["drafts"] == 200
    assert pool["acceptance_rate"] == pytest.approx(360 / 600, abs=0)
    reps = {x["instance"]: x for x in pool["replicas"]}
    assert reps["r0"]["acceptance_rate"] == 240 / 300 and reps["r1"]["acceptance_rate"] == 120 / 300
    # r0 reports in the older coarse bucket only, r1 in the newer: neither has a peer at the same time
    assert reps["r0"]["others_acceptance_rate"] is None and reps["r1"]["others_acceptance_rate"] is None
    assert reps["r0"]["mean_acceptance_length"] == 1 + 240 / 100 and reps["r0"]["drafts"] == 100
    assert reps["r0"]["tpot_p99"] == 0.05  # rank 99 of 100 is the le=0.05 count exactly
    assert reps["r1"]["tpot_p99"] is None and reps["r0"]["engine"] == "0"
    # a window of one coarse bucket holds only the newest (r1's)
    one = client.get("/api/v1/models/m/one/replicas", params={"window": "10m"}).json()
    assert {x["instance"] for x in one["pools"][0]["replicas"]} == {"r1"}
    # a window is rounded up to whole replica buckets
    assert client.get("/api/v1/models/m/one/replicas", params={"window": "7m"}).json()["window_seconds"] == 600


def test_others_are_pooled_over_the_buckets_both_replicas_report(client, db, now):
    """α others (pooled), the outlier rule's figure: the other replicas' sum A / sum D over the coarse buckets
    this replica reports too, never over hours it did not run (r1 joined in the newer bucket)."""
    recs = {ReplicaKey("r0", "0"): [_fine(0, drafts=50, draft_tokens=100, accepted=90),
                                    _fine(600, drafts=50, draft_tokens=100, accepted=40)],
            ReplicaKey("r1", "0"): [_fine(600, drafts=50, draft_tokens=100, accepted=45)]}
    _seed(db, now, replicas=recs)
    body = client.get("/api/v1/models/m/one/replicas", params={"window": "20m"}).json()
    reps = {x["instance"]: x for x in body["pools"][0]["replicas"]}
    assert reps["r0"]["acceptance_rate"] == 130 / 200  # its own window
    assert reps["r0"]["others_acceptance_rate"] == 45 / 100  # r1 over the newer bucket, where both report
    assert reps["r1"]["others_acceptance_rate"] == 40 / 100  # r0 over the newer bucket only, not its 0.90 before


@pytest.mark.parametrize("window", ["8d", "abc", "-5m", "0", "1y"])
def test_replicas_api_refuses_windows_out_of_bounds(client, window):
    r = client.get("/api/v1/models/m/one/replicas", params={"window": window})
    assert r.status_code == 422, r.text
    assert "window" in r.json()["detail"]


def test_replicas_api_unknown_model_is_404(client, db, now):
    _seed(db, now, replicas=_fresh(GOOD))
    r = client.get("/api/v1/models/nope/replicas")
    assert r.status_code == 404 and r.json()["known_models"] == ["m/one"]


def test_replicas_are_in_the_openapi_document(client):
    doc = client.get("/openapi.json").json()
    op = doc["paths"]["/api/v1/models/{model}/replicas"]["get"]
    assert {p["name"] for p in op["parameters"]} >= {"model", "window"}
    assert {"200", "404", "422"} <= set(op["responses"])


# --- the Prometheus adapter ---------------------------------------------------------------------------


class FakeProm:
    """Answers each replica query with one series per replica (values per minute), counting requests."""

    def __init__(self, replicas: int):
        self.replicas, self.requests, self.promql = replicas, 0, []

    def query_range(self, promql, start, end, step):
        self.requests += 1
        self.promql.append(promql)
        out = []
        for i in range(self.replicas):
            labels = {"model_name": POOL.model_name, "traffic_class": "chat", "spec_mode": "eagle3",
                      "instance": f"10.0.0.{i}:8000", "engine": "0"}
            points = [(t, v) for t in range(start, end + 1, step) for v in [self._value(promql, i)]]
            if "position" in promql:
                for pos in range(2):
                    out.append(SeriesPoints({**labels, "position": str(pos)}, [(t, 2.0 - pos) for t, _ in points]))
            elif "_bucket" in promql:
                for le in ("0.01", "+Inf"):
                    out.append(SeriesPoints({**labels, "le": le}, [(t, 4.0 if le == "+Inf" else 1.0) for t, _ in points]))
            else:
                out.append(SeriesPoints(labels, points))
        return out

    @staticmethod
    def _value(promql: str, i: int) -> float:
        if "num_drafts" in promql:
            return 2.0
        if "num_draft_tokens" in promql:
            return 4.0
        if "num_accepted_tokens_total" in promql:
            return 3.0
        return 4.0  # _sum / _count


@pytest.mark.parametrize("n", [1, 8])
def test_prometheus_replica_queries_do_not_grow_with_replicas(n):
    s = Settings(_env_file=None, bucket_seconds=60, replica_bucket_seconds=300)
    fake = FakeProm(n)
    fine, ends = collect._replica_fine(fake, s, collect.PoolLabels(), 1_800_000_060, 1_800_000_600)
    assert ends == [1_800_000_300, 1_800_000_600]
    assert fake.requests == 10  # 3 counters, per position, TPOT and ITL (_bucket, _sum, _count)
    assert all("instance, engine" in q for q in fake.promql)
    assert {k for k, _r in fine} == {ReplicaKey(f"10.0.0.{i}:8000", "0") for i in range(n)}
    assert len(fine) == n * 10  # every minute of both coarse buckets, the first reaching back before the chunk
    assert min(r.bucket_start for _k, r in fine) == 1_800_000_000


def test_prometheus_collection_writes_replica_rows(db, now, monkeypatch):
    from backend.services.replicas import write_replicas as real

    s = Settings(_env_file=None, bucket_seconds=60, replica_bucket_seconds=300)
    fine, ends = collect._replica_fine(FakeProm(3), s, collect.PoolLabels(), 1_800_000_060, 1_800_000_600)
    write_records(db, [BucketRecord(pool=POOL, bucket_start=1_800_000_000, drafts=1, draft_tokens=2, accepted_tokens=1)],
                  width=60, source="prometheus", now=now)
    assert real(db, fine, grain=300, ends=ends, source="prometheus", now=now) == 6
    rows = list(db.scalars(select(ReplicaBucket)))
    assert {(r.drafts, r.draft_tokens, r.accepted_tokens, tuple(r.accepted_per_pos)) for r in rows} == {(10, 20, 15, (10, 5))}
    assert {r.bucket_start.timestamp() for r in rows} == {1_800_000_000, 1_800_000_300}
    assert all(r.tpot_buckets == [5, 20] and r.itl_count == 20 for r in rows)


def test_storage_task_deletes_replica_rows_past_their_retention(db, now):
    from backend.services.rollup import storage

    _seed(db, now, replicas=_fresh(GOOD))
    s = Settings(_env_file=None, replica_retention_days=1)
    assert storage(db, settings=s, now=now).replica_rows_deleted == 0
    later = now + timedelta(days=1, minutes=10)
    assert storage(db, settings=s, now=later).replica_rows_deleted == 2
    assert db.scalar(select(func.count()).select_from(ReplicaBucket)) == 0
    assert db.scalar(select(func.count()).select_from(Replica)) == 0
