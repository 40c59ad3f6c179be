"""Storage side of the peer benchmark: roll up after the back-fill, then bytes per pool-day in both stores
and the retention projection (90 days in specwatch against 30 days of the same pools in Prometheus)."""

from __future__ import annotations

from pathlib import Path

import psycopg

from backend.config import Settings
from tests.support.db import libpq


def rollup(url: str) -> int:
    """Run the rollup maintenance to completion (what the beat-scheduled task does); hour rows written."""
    from backend.db.session import make_engine, make_sessionmaker, session_scope
    try:
        from backend.services import rollup as svc
    except ImportError:
        return 0

    factory = make_sessionmaker(make_engine(url))
    total = 0
    while True:
        with session_scope(factory) as session:
            n = svc.maintain(session)
        total += n.hours
        if not n.more:
            break
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return total


def _relation_bytes(conn, table: str) -> int:
    if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:
        return 0
    row = conn.execute("SELECT pg_total_relation_size(%(t)s::regclass) + coalesce((SELECT sum(pg_total_relation_size("
                       "relid)) FROM pg_partition_tree(%(t)s::regclass) WHERE relid <> %(t)s::regclass), 0)",
                       {"t": table}).fetchone()
    return int(row[0])


def _prom_bytes(tsdb: Path) -> int:
    return sum(f.stat().st_size for f in tsdb.rglob("*") if f.is_file() and "wal" not in f.parts
               and "chunks_head" not in f.parts)


def report(url: str, tsdb: Path, *, pools: int, days: float, settings: Settings) -> dict:
    pool_days = pools * days
    with psycopg.connect(libpq(url)) as conn:
        raw = _relation_bytes(conn, "pool_buckets")
        hourly = sum(_relation_bytes(conn, t) for t in ("pool_buckets_hourly", "pool_spec_hourly", "pool_spec_daily"))
        rows = conn.execute("SELECT count(*) FROM pool_buckets").fetchone()[0]
    prom = _prom_bytes(tsdb)
    raw_pd, hourly_pd, prom_pd = raw / pool_days, hourly / pool_days, prom / pool_days
    keep_raw = min(90.0, getattr(settings, 'raw_retention_days', 90))
    keep_hourly = min(90.0, getattr(settings, 'rollup_retention_days', 90))
    sw90 = keep_raw * raw_pd + keep_hourly * hourly_pd
    prom30 = 30 * prom_pd
    print(f"\nstorage per pool-day: Prometheus {prom_pd / 1024:,.1f} KiB (blocks); specwatch 1-min buckets "
          f"{raw_pd / 1024:,.1f} KiB ({rows / pool_days:,.0f} rows, {raw / max(rows, 1):,.0f} B/row incl. indexes), "
          f"rollups {hourly_pd / 1024:,.1f} KiB (pool_buckets_hourly + pool_spec_hourly with its packed "
          "1-minute acceptance counters + pool_spec_daily)")
    print(f"90 days in specwatch (1-min buckets kept {keep_raw:g} d, rollups {keep_hourly:g} d): "
          f"{sw90 / 2**20:,.2f} MiB per pool; 30 days in Prometheus: {prom30 / 2**20:,.2f} MiB per pool -> "
          f"{'MET' if sw90 <= prom30 else 'NOT MET'} ({sw90 / prom30:.2f}x)")
    return {"prom_pool_day": prom_pd, "raw_pool_day": raw_pd, "hourly_pool_day": hourly_pd,
            "specwatch_90d": sw90, "prometheus_30d": prom30}
