"""Storage per pool-day with 8 replicas per pool, against the limit of twice the storage without replicas.

One day of a fleet is written through the collector's own write paths (write_records for the pool rows,
write_replicas for the replica rows, from 1-minute per-replica records at vLLM's histogram layouts), the
rollup task is run to completion, then the bytes of each table (with indexes and TOAST) are divided by the
pool-days. Two figures:

* per pool-day written: pool rows (1-minute buckets + hourly/daily rollups) vs replica rows;
* retained at steady state: pool rows x their retentions (raw 14 d, rollups 400 d) vs replica rows x 7 d.

    python -m benchmarks replicas            (pools=4, replicas=8)
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import psycopg

from backend.cli.serve import migrate
from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.domain.records import BucketRecord, Histogram, PoolKey, ReplicaKey
from backend.services.ingest import write_records
from backend.services.replicas import write_replicas
from benchmarks import common
from benchmarks.peer_storage import _relation_bytes, rollup
from tests.support.db import drop_database, libpq

DAY = 86400
START = int(datetime(2026, 11, 1, tzinfo=UTC).timestamp())
ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
        80.0, 160.0, 640.0, 2560.0)
K = 4
LIMIT = 2.0


def _hist(rng: random.Random, bounds: tuple[float, ...], n: int, scale: float) -> Histogram:
    counts, total = [], 0
    for _ in range(len(bounds) + 1):
        total += rng.randint(0, n)
        counts.append(float(total))
    return Histogram(bounds, counts, total * scale, float(total))


def _replica_minute(rng: random.Random, pool: PoolKey, start: int) -> BucketRecord:
    drafts = rng.randint(500, 2000)
    per_pos, left = [], drafts
    for _ in range(K):
        left = rng.randint(left // 2, left)
        per_pos.append(float(left))
    return BucketRecord(pool=pool, bucket_start=start, drafts=float(drafts), draft_tokens=float(drafts * K),
                        accepted_tokens=float(sum(per_pos)), accepted_per_pos=per_pos,
                        itl=_hist(rng, ITL, 40, 0.03), tpot=_hist(rng, ITL, 10, 0.02))


def _pool_minute(replicas: list[BucketRecord], rng: random.Random) -> BucketRecord:
    first = replicas[0]
    rec = BucketRecord(pool=first.pool, bucket_start=first.bucket_start, ttft=_hist(rng, TTFT, 10, 0.2),
                       generation_tokens=float(rng.randint(10_000, 90_000)), prompt_tokens=float(rng.randint(10_000, 900_000)),
                       finished_requests=float(rng.randint(10, 900)), preemptions=0.0, running_mean=rng.uniform(1, 64))
    rec.drafts = sum(r.drafts for r in replicas)
    rec.draft_tokens = sum(r.draft_tokens for r in replicas)
    rec.accepted_tokens = sum(r.accepted_tokens for r in replicas)
    rec.accepted_per_pos = [sum(r.accepted_per_pos[i] for r in replicas) for i in range(K)]
    for name in ("itl", "tpot"):
        hs = [getattr(r, name) for r in replicas]
        setattr(rec, name, Histogram(hs[0].bounds, [sum(c) for c in zip(*(h.counts for h in hs), strict=True)],
                                     sum(h.sum for h in hs), sum(h.count for h in hs)))
    return rec


def fill(url: str, *, pools: int, replicas: int, days: int, settings: Settings) -> None:
    factory = make_sessionmaker(make_engine(url))
    rng = random.Random(30)
    width, grain = settings.bucket_seconds, settings.replica_grain
    now = datetime.fromtimestamp(START + days * DAY, UTC)
    for p in range(pools):
        pool = PoolKey(f"bench-model-{p}", "chat", "eagle3")
        for c0 in range(START, START + days * DAY, grain):  # one coarse bucket per transaction
            fine, pool_rows = [], []
            for t in range(c0, c0 + grain, width):
                reps = [_replica_minute(rng, pool, t) for _ in range(replicas)]
                fine += [(ReplicaKey(f"10.0.{p}.{i}:8000", "0"), r) for i, r in enumerate(reps)]
                pool_rows.append(_pool_minute(reps, rng))
            with session_scope(factory) as session:
                write_records(session, pool_rows, width=width, source="prometheus", now=now)
                write_replicas(session, fine, grain=grain, ends=[c0 + grain], source="prometheus", now=now)
    factory.kw["bind"].dispose()


def measure(url: str, *, pool_days: float, settings: Settings) -> dict:
    with psycopg.connect(libpq(url)) as conn:
        raw = _relation_bytes(conn, "pool_buckets")
        rollups = sum(_relation_bytes(conn, t) for t in ("pool_buckets_hourly", "pool_spec_hourly", "pool_spec_daily"))
        reps = sum(_relation_bytes(conn, t) for t in ("replica_buckets", "replicas"))
        rows = conn.execute("SELECT count(*) FROM replica_buckets").fetchone()[0]
    pool_pd, rep_pd = (raw + rollups) / pool_days, reps / pool_days
    kept_pool = (settings.raw_retention_days * raw + settings.rollup_retention_days * rollups) / pool_days
    kept_rep = settings.replica_retention_days * rep_pd
    return {"raw": raw / pool_days, "rollups": rollups / pool_days, "pool": pool_pd, "replicas": rep_pd,
            "replica_rows": rows / pool_days, "growth": (pool_pd + rep_pd) / pool_pd,
            "kept_pool": kept_pool, "kept_replicas": kept_rep, "kept_growth": (kept_pool + kept_rep) / kept_pool}


def run(admin_url: str | None = None, *, pools: int = 4, replicas: int = 8, days: int = 1) -> dict:
    settings = Settings(_env_file=None)
    admin, name, url = common.scratch_database(admin_url, "specwatch_replica_bench")
    try:
        migrate(url)
        fill(url, pools=pools, replicas=replicas, days=days, settings=settings)
        rollup(url)
        m = measure(url, pool_days=pools * days, settings=settings)
    finally:
        drop_database(admin, name)
    verdict = "MET" if m["growth"] <= LIMIT else "NOT MET"
    print(f"{pools} pools x {replicas} replicas x {days} d; replica rows {settings.replica_grain}s wide, kept "
          f"{settings.replica_retention_days:g} d")
    print(f"per pool-day: pool rows {m['pool'] / 1024:,.1f} KiB (1-min {m['raw'] / 1024:,.1f} + rollups "
          f"{m['rollups'] / 1024:,.1f}); replica rows {m['replicas'] / 1024:,.1f} KiB ({m['replica_rows']:,.0f} rows)")
    print(f"storage growth with {replicas} replicas: {m['growth']:.2f}x per pool-day written (limit {LIMIT:g}x: "
          f"{verdict}); {m['kept_growth']:.3f}x retained at steady state (pool {m['kept_pool'] / 2**20:,.1f} MiB, "
          f"replicas {m['kept_replicas'] / 2**20:,.1f} MiB per pool)")
    return m


def main(argv: list[str] | None = None) -> None:
    a = common.parser(__doc__, prog="python -m benchmarks replicas", pools=4, replicas=8, days=1).parse_args(argv)
    run(a.admin_url, pools=a.pools, replicas=a.replicas, days=a.days)


if __name__ == "__main__":
    main()
