"""SQL for replicas: names, coarse buckets, window reads, retention."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from backend.db.models import Pool
from backend.db.models_replicas import Replica, ReplicaBucket
from backend.domain.records import PoolKey

BUCKET_COLUMNS = ("bucket_seconds", "drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos",
                  "tpot_layout_id", "tpot_buckets", "tpot_sum", "tpot_count",
                  "itl_layout_id", "itl_buckets", "itl_sum", "itl_count")


def pool_ids(session: Session, keys: Sequence[PoolKey]) -> dict[PoolKey, int]:
    if not keys:
        return {}
    rows = session.execute(text(
        "SELECT p.id, p.model_name, p.traffic_class, p.spec_mode FROM pools p JOIN unnest(CAST(:m AS varchar[]), "
        "CAST(:c AS varchar[]), CAST(:s AS varchar[])) AS k(m, c, s) "
        "ON p.model_name = k.m AND p.traffic_class = k.c AND p.spec_mode = k.s"),
        {"m": [k.model_name for k in keys], "c": [k.traffic_class for k in keys], "s": [k.spec_mode for k in keys]})
    return {PoolKey(m, c, s): pid for pid, m, c, s in rows}


def upsert_replicas(session: Session, seen: dict[tuple[int, str, str], tuple[datetime, datetime, dict]]
                    ) -> dict[tuple[int, str, str], int]:
    """Create or update replicas; seen maps (pool id, instance, engine) -> (first start, last end, labels)."""
    if not seen:
        return {}
    rows = [{"pool_id": p, "instance": i, "engine": e, "first_seen": f, "last_seen": last, "labels": labels}
            for (p, i, e), (f, last, labels) in sorted(seen.items())]
    stmt = insert(Replica).values(rows)
    stmt = stmt.on_conflict_do_update(
        index_elements=["pool_id", "instance", "engine"],
        set_={"first_seen": text("least(replicas.first_seen, excluded.first_seen)"),
              "last_seen": text("greatest(replicas.last_seen, excluded.last_seen)"),
              "labels": text("CASE WHEN excluded.last_seen >= replicas.last_seen THEN excluded.labels "
                             "ELSE replicas.labels END")},
    ).returning(Replica.id, Replica.pool_id, Replica.instance, Replica.engine)
    return {(p, i, e): rid for rid, p, i, e in session.execute(stmt)}


def upsert_buckets(session: Session, rows: Sequence[dict]) -> int:
    """Insert or overwrite coarse buckets keyed by (replica, bucket_start): a re-run rewrites identical rows."""
    if not rows:
        return 0
    rows = list({(r["replica_id"], r["bucket_start"]): r for r in rows}.values())
    # one statement for any number of rows (SQLAlchemy batches them as multi-row VALUES): a statement with
    # the rows in it is compiled anew for every batch, which cost more than the insert
    stmt = insert(ReplicaBucket.__table__)
    stmt = stmt.on_conflict_do_update(index_elements=["replica_id", "bucket_start"],
                                      set_={c: getattr(stmt.excluded, c) for c in BUCKET_COLUMNS})
    columns = ["replica_id", "bucket_start", *BUCKET_COLUMNS]
    session.connection().execute(stmt, [{c: r.get(c) for c in columns} for r in rows])
    return len(rows)


def replicas_of(session: Session, pool_ids: Sequence[int]) -> list[Replica]:
    if not pool_ids:
        return []
    return list(session.scalars(select(Replica).where(Replica.pool_id.in_(list(pool_ids)))
                                .order_by(Replica.pool_id, Replica.instance, Replica.engine)))


def buckets(session: Session, replica_ids: Sequence[int], *, since: datetime, until: datetime) -> list[ReplicaBucket]:
    """The coarse buckets wholly inside (since, until] (start >= since, end <= until)."""
    if not replica_ids:
        return []
    ends_inside = text("replica_buckets.bucket_start + replica_buckets.bucket_seconds * interval '1 second' "
                       "<= :until").bindparams(until=until)
    return list(session.scalars(select(ReplicaBucket).where(
        ReplicaBucket.replica_id.in_(list(replica_ids)), ReplicaBucket.bucket_start >= since,
        ReplicaBucket.bucket_start < until, ends_inside).order_by(ReplicaBucket.replica_id,
                                                                  ReplicaBucket.bucket_start)))


def layouts(session: Session, ids: set[int]) -> dict[int, tuple[float, ...]]:
    from backend.db.models import HistogramLayout

    if not ids:
        return {}
    return {lid: tuple(b) for lid, b in session.execute(
        select(HistogramLayout.id, HistogramLayout.bounds).where(HistogramLayout.id.in_(list(ids))))}


def model_pools(session: Session, model: str) -> list[Pool]:
    return list(session.scalars(select(Pool).where(Pool.model_name == model)
                                .order_by(Pool.traffic_class, Pool.spec_mode)))


def prune(session: Session, *, before: datetime) -> int:
    """Delete coarse buckets that ended before `before`, then replicas left without a bucket and unseen since."""
    n = session.execute(delete(ReplicaBucket).where(ReplicaBucket.bucket_start < before)).rowcount or 0
    session.execute(delete(Replica).where(Replica.last_seen < before, ~select(ReplicaBucket.replica_id)
                                          .where(ReplicaBucket.replica_id == Replica.id).exists()))
    return n


def replica_span(session: Session, pool_ids: Sequence[int]) -> dict[int, tuple[datetime, datetime]]:
    """Per pool, (start of its first replica bucket, end of its last) over all stored history. Pools without
    replica rows are absent."""
    if not pool_ids:
        return {}
    # each replica's first and last row through the (replica_id, bucket_start) key: two index probes a replica
    rows = session.execute(text(
        "SELECT r.pool_id, min(f.lo), max(l.hi) FROM replicas r "
        "CROSS JOIN LATERAL (SELECT b.bucket_start AS lo FROM replica_buckets b WHERE b.replica_id = r.id "
        "  ORDER BY b.bucket_start LIMIT 1) f "
        "CROSS JOIN LATERAL (SELECT b.bucket_start + b.bucket_seconds * interval '1 second' AS hi "
        "  FROM replica_buckets b WHERE b.replica_id = r.id ORDER BY b.bucket_start DESC LIMIT 1) l "
        "WHERE r.pool_id = ANY(:ids) GROUP BY r.pool_id"), {"ids": list(pool_ids)})
    return {pid: (lo, hi) for pid, lo, hi in rows}


def mean_replicas(session: Session, pool_ids: Sequence[int], *, since: datetime, until: datetime) -> dict[int, float]:
    """Per pool, the mean number of replicas reporting per coarse bucket that overlaps (since, until]: rows over
    distinct bucket starts. Pools without replica rows in the window are absent."""
    if not pool_ids:
        return {}
    rows = session.execute(text(
        "SELECT r.pool_id, count(*)::float8 / count(DISTINCT b.bucket_start) FROM replica_buckets b "
        "JOIN replicas r ON r.id = b.replica_id WHERE r.pool_id = ANY(:ids) AND b.bucket_start < :until "
        "AND b.bucket_start + b.bucket_seconds * interval '1 second' > :since GROUP BY r.pool_id"),
        {"ids": list(pool_ids), "since": since, "until": until})
    return {pid: float(n) for pid, n in rows}
