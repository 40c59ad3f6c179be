"""Every write of the collection path (pools, layouts, facts, rejections, runs, cursors, raw scrapes).

Upserts are keyed so that re-running any cycle rewrites the same rows: facts by (pool, bucket_start),
rejections by (pool labels, bucket, rule), pools by their labels. Nothing here commits."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from operator import itemgetter

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from backend.db import config_repo, rollups
from backend.db.models import (
    CollectionRun,
    CollectorCursor,
    HistogramLayout,
    Pool,
    PoolBucket,
    Rejection,
)
from backend.domain import config_history
from backend.domain.engines import DEFAULT_ENGINE
from backend.domain.records import PoolKey, PoolSeen

FACT_COLUMNS = [c.name for c in PoolBucket.__table__.columns if c.name not in ("pool_id", "bucket_start")]


def try_lock(session: Session, name: str) -> bool:
    """A transaction-scoped advisory lock: False if another transaction holds it."""
    return bool(session.execute(select(func.pg_try_advisory_xact_lock(func.hashtext(name)))).scalar())


def upsert_pools(session: Session, seen: dict[PoolKey, PoolSeen], *,
                 engines: dict[PoolKey, str] | None = None) -> dict[PoolKey, int]:
    """Create or update pools from what a batch saw of them (first bucket start, last bucket end, and the
    configuration per bucket): a change of drafter, K or vLLM version in buckets at least as new as the
    pool's latest stored one becomes a config_changes row dated at its first bucket and the pool's current
    value (domain.config_history); older buckets (a re-collection, a back-fill) change neither. `engines`:
    pool -> the engine its counts came from (vllm where not given; the latest write names it).

    One statement for the pools whatever their number (the rows travel as arrays)."""
    if not seen:
        return {}
    keys = sorted(seen)
    engines = engines or {}
    before = config_repo.current_config(session, [(k.model_name, k.traffic_class, k.spec_mode) for k in keys])
    params = {"m": [k.model_name for k in keys], "c": [k.traffic_class for k in keys],
              "s": [k.spec_mode for k in keys], "f": [seen[k].first for k in keys], "l": [seen[k].end for k in keys],
              "e": [engines.get(k) or DEFAULT_ENGINE for k in keys]}
    result = session.execute(_UPSERT_POOLS, params)
    out = {PoolKey(m, c, s): pid for pid, m, c, s in result}
    now = datetime.now(UTC)
    by_fields: dict[tuple[str, ...], list[dict]] = {}
    for key in keys:
        stored = before.get(tuple(key))
        values = stored.values if stored else {}
        changes, updates = config_history.detect(values, stored.last_seen if stored else None, seen[key])
        for c in changes:  # the history keeps each change (config_changes); the pool row the current value
            config_repo.record(session, pool_id=out[key], at=c.at, field=c.field, old=c.old, new=c.new,
                               source="collection", now=now)
        if updates:
            by_fields.setdefault(tuple(sorted(updates)), []).append({"id": out[key], **updates})
    for rows in by_fields.values():  # one executemany per set of changed columns (ORM bulk update by key)
        session.execute(update(Pool), rows)
    return out


def stored_pools(session: Session, keys: Sequence[PoolKey], *, origin: str = "engine") -> tuple[set[PoolKey], int]:
    """Which of `keys` are stored pools of `origin` (engine: collection's; requests: the per-request records
    source), and how many pools are stored in all (both origins: max_pools bounds them together)."""
    total = session.execute(select(func.count(Pool.id))).scalar_one()
    if not keys or not total:
        return set(), total
    rows = session.execute(text(
        "SELECT p.model_name, p.traffic_class, p.spec_mode FROM pools p JOIN unnest(CAST(:m AS varchar[]), "
        "CAST(:c AS varchar[]), CAST(:s AS varchar[])) AS k(m, c, s) "
        "ON p.model_name = k.m AND p.traffic_class = k.c AND p.spec_mode = k.s WHERE p.origin = :o"),
        {"m": [k.model_name for k in keys], "c": [k.traffic_class for k in keys], "s": [k.spec_mode for k in keys],
         "o": origin})
    return {PoolKey(*r) for r in rows}, total


_UPSERT_POOLS = text("""
    INSERT INTO pools (model_name, traffic_class, spec_mode, first_seen, last_seen, engine)
    SELECT * FROM unnest(CAST(:m AS varchar[]), CAST(:c AS varchar[]), CAST(:s AS varchar[]),
                         CAST(:f AS timestamptz[]), CAST(:l AS timestamptz[]), CAST(:e AS varchar[]))
    ON CONFLICT (model_name, traffic_class, spec_mode, origin) DO UPDATE SET
        first_seen = least(pools.first_seen, excluded.first_seen),
        last_seen = greatest(pools.last_seen, excluded.last_seen),
        engine = excluded.engine
    RETURNING id, model_name, traffic_class, spec_mode
""")


def layout_ids(session: Session, layouts: Iterable[tuple[float, ...]]) -> dict[tuple[float, ...], int]:
    wanted = sorted({tuple(float(x) for x in b) for b in layouts})
    if not wanted:
        return {}
    def known() -> dict[tuple[float, ...], int]:
        found = session.execute(select(HistogramLayout.id, HistogramLayout.bounds)
                                .where(HistogramLayout.bounds.in_([list(b) for b in wanted])))
        return {tuple(bounds): lid for lid, bounds in found}

    out = known()  # the usual case: every layout exists already (one round trip)
    if len(out) < len(wanted):
        session.execute(insert(HistogramLayout).values([{"bounds": list(b)} for b in wanted if b not in out])
                        .on_conflict_do_nothing(index_elements=["bounds"]))
        out = known()
    return out


def upsert_buckets(session: Session, rows: Sequence[dict]) -> int:
    """Insert or overwrite facts keyed by (pool, bucket_start).

    The rows are binary-COPY'd into a session-local staging table and merged with one
    INSERT ... SELECT ... ON CONFLICT DO UPDATE; the daily partitions the rows need are made first. Float
    arrays are encoded here (one struct.pack per array) and sent as raw field bytes: psycopg's generic
    per-element array dumping was the largest single cost of the write path."""
    if not rows:
        return 0
    rows = list({(r["pool_id"], r["bucket_start"]): r for r in rows}.values())  # one row per key, last wins
    rollups.ensure_partitions(session, {_day(r["bucket_start"]) for r in rows})
    cursor = session.connection().connection.driver_connection.cursor()
    cursor.execute(_STAGING_DDL)
    get, arrays = _GET, _ARRAY_IDX
    with cursor.copy(_COPY_IN) as copy:
        copy.set_types(_COPY_TYPES)
        for r in rows:
            values = list(get(r))
            for i in arrays:
                if values[i] is not None:
                    values[i] = float8_array(values[i])
            copy.write_row(values)
    cursor.execute(_MERGE)
    return len(rows)


def _day(t: datetime):
    return (t if t.tzinfo is UTC else t.astimezone(UTC)).date()


_ARRAY_HEAD = struct.Struct(">5i")
_STRUCTS: dict[int, struct.Struct] = {}


def float8_array(values: Sequence[float | None]) -> bytes:
    """A one-dimensional float8[] in Postgres's binary format: ndim, has-null, element oid 701, length,
    lower bound 1, then (length 8, big-endian double) per element (-1 for a NULL element)."""
    n = len(values)
    if n == 0:
        return struct.pack(">3i", 0, 0, 701)
    if None in values:
        parts = [_ARRAY_HEAD.pack(1, 1, 701, n, 1)]
        parts += [b"\xff\xff\xff\xff" if v is None else struct.pack(">id", 8, v) for v in values]
        return b"".join(parts)
    st = _STRUCTS.get(n)
    if st is None:
        st = _STRUCTS[n] = struct.Struct(">5i" + "id" * n)
    args = [8, 0.0] * n
    args[1::2] = values
    return st.pack(1, 0, 701, n, 1, *args)


_ALL_COLUMNS = ["pool_id", "bucket_start", *FACT_COLUMNS]
_GET = itemgetter(*_ALL_COLUMNS)
_COLS = ", ".join(_ALL_COLUMNS)
_STAGING_DDL = ("CREATE TEMP TABLE IF NOT EXISTS _pool_buckets_in "
                "(LIKE pool_buckets INCLUDING DEFAULTS) ON COMMIT DELETE ROWS")
_COPY_IN = f"COPY _pool_buckets_in ({_COLS}) FROM STDIN (FORMAT BINARY)"
_SQL_TYPES = [re.sub(r"\(\d+\)", "", PoolBucket.__table__.columns[c].type.compile(dialect=postgresql.dialect())
                     .lower()).replace("double precision", "float8") for c in _ALL_COLUMNS]
_ARRAY_IDX = [i for i, t in enumerate(_SQL_TYPES) if t.endswith("[]")]
_COPY_TYPES = ["bytea" if t.endswith("[]") else t for t in _SQL_TYPES]  # arrays: pre-encoded field bytes
_MERGE = (f"INSERT INTO pool_buckets ({_COLS}) SELECT {_COLS} FROM _pool_buckets_in "
          "ON CONFLICT (pool_id, bucket_start) DO UPDATE SET "
          + ", ".join(f"{c} = EXCLUDED.{c}" for c in FACT_COLUMNS) + "; TRUNCATE _pool_buckets_in")


def record_rejections(session: Session, rows: Sequence[dict]) -> int:
    """Store refused data (idempotently: the same rule on the same pool and bucket is one row)."""
    if not rows:
        return 0
    stmt = insert(Rejection).values(list(rows)).on_conflict_do_nothing(
        index_elements=["model_name", "traffic_class", "spec_mode", "bucket_start", "rule"]).returning(Rejection.id)
    return len(session.execute(stmt).all())


def start_run(session: Session, *, kind: str, source: str, now: datetime) -> int:
    run = CollectionRun(kind=kind, source=source, started_at=now, status="running", pools=0, rows_written=0,
                        rejected=0, requests=0)
    session.add(run)
    session.flush()
    return run.id


def close_stale_runs(session: Session, *, started_before: datetime, now: datetime, reason: str) -> int:
    """Mark runs still `running` that started before `started_before` as abandoned (their process died)."""
    stmt = (update(CollectionRun).where(CollectionRun.status == "running", CollectionRun.started_at < started_before)
            .values(status="abandoned", finished_at=now, error=reason))
    return session.execute(stmt).rowcount or 0


def finish_run(session: Session, run_id: int, *, now: datetime, status: str, **counts) -> None:
    session.execute(update(CollectionRun).where(CollectionRun.id == run_id)
                    .values(finished_at=now, status=status, **counts))


def get_cursor(session: Session, name: str) -> datetime | None:
    return session.execute(select(CollectorCursor.last_bucket_end).where(CollectorCursor.name == name)).scalar()


def advance_cursor(session: Session, name: str, end: datetime, *, now: datetime) -> None:
    stmt = insert(CollectorCursor).values(name=name, last_bucket_end=end, updated_at=now)
    stmt = stmt.on_conflict_do_update(
        index_elements=["name"],
        set_={"last_bucket_end": func.greatest(CollectorCursor.last_bucket_end, stmt.excluded.last_bucket_end),
              "updated_at": stmt.excluded.updated_at})
    session.execute(stmt)


def has_facts(session: Session) -> bool:
    return session.execute(select(PoolBucket.pool_id).limit(1)).first() is not None


def server_now(session: Session) -> datetime:
    return session.execute(text("select now()")).scalar_one()
