"""Every write of the collection path (pools, layouts, facts, rejections, runs, cursors, raw scrapes).

Upserts are keyed so that re-running any cycle rewrites the same rows: facts by (pool, bucket_start),
rejections by (pool labels, bucket, rule), pools by their labels. Nothing here commits."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from backend.db.models import (
    CollectionRun,
    CollectorCursor,
    HistogramLayout,
    Pool,
    PoolBucket,
    RawScrape,
    Rejection,
)
from backend.domain.records import PoolKey

FACT_COLUMNS = [c.name for c in PoolBucket.__table__.columns if c.name not in ("pool_id", "bucket_start")]


def try_lock(session: Session, name: str) -> bool:
    """A transaction-scoped advisory lock: False if another transaction holds it."""
    return bool(session.execute(select(func.pg_try_advisory_xact_lock(func.hashtext(name)))).scalar())


def upsert_pools(session: Session, seen: dict[PoolKey, tuple[datetime, datetime, int | None]]) -> dict[PoolKey, int]:
    """Create or update pools; seen maps pool -> (first bucket start, last bucket end, K or None)."""
    if not seen:
        return {}
    rows = [{"model_name": k.model_name, "traffic_class": k.traffic_class, "spec_mode": k.spec_mode,
             "first_seen": first, "last_seen": last, "num_spec_tokens": kk}
            for k, (first, last, kk) in sorted(seen.items())]
    result = session.execute(_UPSERT_POOLS, rows)
    return {PoolKey(m, c, s): pid for pid, m, c, s in result}


def _upsert_pools_stmt():
    stmt = insert(Pool)
    return stmt.on_conflict_do_update(
        index_elements=["model_name", "traffic_class", "spec_mode"],
        set_={"first_seen": func.least(Pool.first_seen, stmt.excluded.first_seen),
              "last_seen": func.greatest(Pool.last_seen, stmt.excluded.last_seen),
              "num_spec_tokens": func.coalesce(stmt.excluded.num_spec_tokens, Pool.num_spec_tokens)},
    ).returning(Pool.id, Pool.model_name, Pool.traffic_class, Pool.spec_mode, sort_by_parameter_order=True)


_UPSERT_POOLS = _upsert_pools_stmt()


def layout_ids(session: Session, layouts: Iterable[tuple[float, ...]]) -> dict[tuple[float, ...], int]:
    wanted = sorted({tuple(float(x) for x in b) for b in layouts})
    if not wanted:
        return {}
    session.execute(insert(HistogramLayout).values([{"bounds": list(b)} for b in wanted])
                    .on_conflict_do_nothing(index_elements=["bounds"]))
    found = session.execute(select(HistogramLayout.id, HistogramLayout.bounds)
                            .where(HistogramLayout.bounds.in_([list(b) for b in wanted])))
    return {tuple(bounds): lid for lid, bounds in found}


def upsert_buckets(session: Session, rows: Sequence[dict]) -> int:
    """Insert or overwrite facts keyed by (pool, bucket_start).

    The rows are COPY'd into a session-local staging table and merged with one INSERT ... SELECT ...
    ON CONFLICT DO UPDATE, which keeps the write path close to a raw COPY (see `make bench`)."""
    if not rows:
        return 0
    rows = list({(r["pool_id"], r["bucket_start"]): r for r in rows}.values())  # one row per key, last wins
    cursor = session.connection().connection.driver_connection.cursor()
    cursor.execute(_STAGING_DDL)
    with cursor.copy(_COPY_IN) as copy:
        copy.set_types(_COPY_TYPES)
        for r in rows:
            copy.write_row([r[c] for c in _ALL_COLUMNS])
    cursor.execute(_MERGE)
    cursor.execute("TRUNCATE _pool_buckets_in")
    return len(rows)


_ALL_COLUMNS = ["pool_id", "bucket_start", *FACT_COLUMNS]
_COLS = ", ".join(_ALL_COLUMNS)
_STAGING_DDL = ("CREATE TEMP TABLE IF NOT EXISTS _pool_buckets_in "
                "(LIKE pool_buckets INCLUDING DEFAULTS) ON COMMIT DELETE ROWS")
_COPY_IN = f"COPY _pool_buckets_in ({_COLS}) FROM STDIN (FORMAT BINARY)"
_COPY_TYPES = [re.sub(r"\(\d+\)", "", PoolBucket.__table__.columns[c].type.compile(dialect=postgresql.dialect())
                      .lower()).replace("double precision", "float8") for c in _ALL_COLUMNS]
_MERGE = (f"INSERT INTO pool_buckets ({_COLS}) SELECT {_COLS} FROM _pool_buckets_in "
          "ON CONFLICT (pool_id, bucket_start) DO UPDATE SET "
          + ", ".join(f"{c} = EXCLUDED.{c}" for c in FACT_COLUMNS))


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


def add_raw_scrapes(session: Session, rows: Sequence[dict]) -> None:
    if rows:
        session.execute(insert(RawScrape).values(list(rows)).on_conflict_do_nothing())


def raw_scrapes(session: Session, *, since: datetime, until: datetime) -> list[RawScrape]:
    return list(session.scalars(select(RawScrape).where(RawScrape.scraped_at > since,
                                                        RawScrape.scraped_at <= until)
                                .order_by(RawScrape.scraped_at)))


def prune_raw_scrapes(session: Session, *, before: datetime) -> int:
    return session.execute(delete(RawScrape).where(RawScrape.scraped_at < before)).rowcount or 0


def has_facts(session: Session) -> bool:
    return session.execute(select(PoolBucket.pool_id).limit(1)).first() is not None


def server_now(session: Session) -> datetime:
    return session.execute(text("select now()")).scalar_one()
