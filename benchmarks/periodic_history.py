"""The periodic bench's fleet (`python -m benchmarks periodic`): N pools and their stored history, built
set-based inside Postgres (see benchmarks.periodic_bench), and the next bucket of each as collection
assembles it."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import psycopg

from backend.db import rollups
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.domain.records import BucketRecord, Histogram, PoolKey
from backend.services import rollup
from benchmarks.api_bench import BOUNDS
from tests.support.db import libpq

BATCH = 500  # pools per INSERT ... SELECT of the history


def pinned_now() -> datetime:
    """Half-way through the previous hour (the rollup re-aggregates a half-full hour, as on average)."""
    t = datetime.now(UTC).replace(minute=30, second=0, microsecond=0) - timedelta(hours=1)
    return t


POOLS_SQL = """
INSERT INTO pools (model_name, traffic_class, spec_mode, num_spec_tokens, first_seen, last_seen, origin)
SELECT 'model-' || (i / 4), (ARRAY['chat', 'code'])[mod(i / 2, 2) + 1], (ARRAY['eagle3', 'off'])[mod(i, 2) + 1],
       CASE WHEN mod(i, 2) = 0 THEN 3 END, %(first)s, %(last)s, 'prometheus'
FROM generate_series(0, %(n)s - 1) AS i ORDER BY i
"""

# one row per pool and minute: counters around the simulator's steady pools (alpha ~ 0.6 for K = 3),
# cumulative ITL/TPOT counts on vLLM's 19 bounds + Inf, running requests between 5 and 10
BUCKETS_SQL = """
INSERT INTO pool_buckets (pool_id, bucket_start, bucket_seconds, drafts, draft_tokens, accepted_tokens,
    accepted_per_pos, itl_layout_id, itl_buckets, itl_sum, itl_count, tpot_layout_id, tpot_buckets, tpot_sum,
    tpot_count, generation_tokens, finished_requests, running_mean, source, collected_at)
SELECT p.id, t, 60,
       CASE WHEN p.spec THEN 200 END, CASE WHEN p.spec THEN 600 END,
       CASE WHEN p.spec THEN a0 + a1 + a2 END, CASE WHEN p.spec THEN ARRAY[a0, a1, a2] END,
       %(layout)s, ARRAY[0, 0, h1, h1 + h2, h1 + h2 + 5, h1 + h2 + 8, h1 + h2 + 9, h1 + h2 + 10, h1 + h2 + 10,
                         h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10,
                         h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10]::double precision[],
       (h1 + h2 + 10) * 0.05, h1 + h2 + 10,
       %(layout)s, ARRAY[0, h1, h1 + h2, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10,
                         h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10,
                         h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10,
                         h1 + h2 + 10]::double precision[],
       (h1 + h2 + 10) * CASE WHEN p.spec THEN 0.02 ELSE 0.04 END, h1 + h2 + 10, 1000, 10, 5 + h2 / 10.0,
       'prometheus', t + interval '70 seconds'
FROM (SELECT id, spec_mode <> 'off' AS spec FROM pools WHERE id >= %(lo)s AND id < %(hi)s) AS p
CROSS JOIN generate_series(%(start)s::timestamptz, %(end)s::timestamptz, interval '1 minute') AS t
CROSS JOIN LATERAL (SELECT 150 + floor(random() * 20) AS a0, 90 + floor(random() * 20) AS a1,
                           40 + floor(random() * 10) AS a2, 40 + floor(random() * 20) AS h1,
                           30 + floor(random() * 20) AS h2 WHERE p.id IS NOT NULL OFFSET 0) AS r
"""


def _copy_back(conn: psycopg.Connection, table: str, column: str, days: int, step: str) -> int:
    """Copy the newest day of a rollup table back one day at a time (`days` - 1 times): rows are equal to
    a real day's, so reads over long windows do the work they do in production."""
    cols = [r[0] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
        (table,)).fetchall()]
    newest = conn.execute(f"SELECT max({column}) FROM {table}").fetchone()[0]
    if newest is None:
        return 0
    sel = ", ".join(f"{c} - %(shift)s::interval" if c == column else c for c in cols)
    total = 0
    for k in range(1, days):
        total += conn.execute(
            f"INSERT INTO {table} ({', '.join(cols)}) SELECT {sel} FROM {table} "
            f"WHERE {column} > %(newest)s - interval '1 day' AND {column} <= %(newest)s ON CONFLICT DO NOTHING",
            {"shift": f"{k * 86400} seconds", "newest": newest, "step": step}).rowcount
    return total


def build(url: str, n: int, *, now: datetime, raw_hours: int, days: int) -> dict:
    """The n-pool fleet's stored history ending at `now` (see the module's docstring); seconds per phase."""
    out: dict[str, float] = {}
    first_raw = now - timedelta(hours=raw_hours)
    last_start = now - timedelta(minutes=2)  # the newest bucket ends a minute before now (settle)
    t0 = time.perf_counter()
    factory = make_sessionmaker(make_engine(url))
    with session_scope(factory) as session:
        rollups.ensure_partitions(session, [(first_raw + timedelta(days=i)).date() for i in range(raw_hours // 24 + 3)])
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        conn.execute("INSERT INTO histogram_layouts (bounds) VALUES (%s)", (BOUNDS,))
        layout = conn.execute("SELECT id FROM histogram_layouts").fetchone()[0]
        conn.execute(POOLS_SQL, {"n": n, "first": now - timedelta(days=days), "last": last_start + timedelta(minutes=1)})
        lo, hi = conn.execute("SELECT min(id), max(id) + 1 FROM pools").fetchone()
        conn.execute("SELECT setseed(0.1)")  # the same history every build (random() in BUCKETS_SQL)
        for b in range(lo, hi, BATCH):
            conn.execute(BUCKETS_SQL, {"lo": b, "hi": min(hi, b + BATCH), "layout": layout,
                                       "start": first_raw, "end": last_start})
        out["raw buckets"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        while True:  # the rollup task, as beat keeps it
            with session_scope(factory) as session:
                res = rollup.maintain(session, now=now)
            if not res.more:
                break
        out["rollups"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = _copy_back(conn, "pool_buckets_hourly", "hour_start", days, "1 hour")
        _copy_back(conn, "pool_spec_hourly", "hour_start", days, "1 hour")
        _copy_back(conn, "pool_spec_daily", "day_start", days, "1 day")
        conn.execute("VACUUM ANALYZE")
        out["older rollups"] = time.perf_counter() - t0
        out["raw rows"] = conn.execute("SELECT count(*) FROM pool_buckets").fetchone()[0]
        out["hour rows"] = rows
        out["MiB"] = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 2**20
    factory.kw["bind"].dispose()
    return out


def next_records(url: str, end: datetime) -> list[BucketRecord]:
    """One bucket per pool ending at `end`, as a collection cycle assembles them (the write path's input)."""
    with psycopg.connect(libpq(url)) as conn:
        pools = conn.execute("SELECT model_name, traffic_class, spec_mode FROM pools ORDER BY id").fetchall()
    start = end.timestamp() - 60
    out = []
    for i, (model, cls, mode) in enumerate(pools):
        h1, h2 = 40 + i % 20, 30 + (i * 7) % 20
        itl = [0, 0, h1, h1 + h2, h1 + h2 + 5, h1 + h2 + 8, h1 + h2 + 9] + [h1 + h2 + 10] * 13
        tpot = [0, h1, h1 + h2] + [h1 + h2 + 10] * 17
        spec = mode != "off"
        rec = BucketRecord(PoolKey(model, cls, mode), start, generation_tokens=1000.0, finished_requests=10.0,
                           running_mean=5 + h2 / 10,
                           itl=Histogram(tuple(BOUNDS), [float(c) for c in itl], (h1 + h2 + 10) * 0.05, float(h1 + h2 + 10)),
                           tpot=Histogram(tuple(BOUNDS), [float(c) for c in tpot],
                                          (h1 + h2 + 10) * (0.02 if spec else 0.04), float(h1 + h2 + 10)))
        if spec:
            rec.drafts, rec.draft_tokens, rec.accepted_tokens = 200.0, 600.0, 300.0
            rec.accepted_per_pos = [160.0, 95.0, 45.0]
        out.append(rec)
    return out
