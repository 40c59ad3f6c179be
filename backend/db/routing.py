"""Where a read's buckets come from: raw 1-minute buckets, or hourly rollups for the whole clean hours.

A read asks for the buckets whose END lies in (A, B]. The whole hours inside, [h1, h2) by hour start
(each hour H holding the ends in (H, H + 1 h]), come from `pool_buckets_hourly` unless the hour is in
`rollup_dirty` (written since the last rollup run: new buckets, a late back-fill); dirty hours and the
two partial-hour edges come from `pool_buckets`. All of it is one statement, so one snapshot: the rollup
task commits an hour's new sums together with its removal from the queue, and a writer commits its
buckets together with the dirty mark, hence the union is always exactly the raw buckets' set.

Dirty hours are read per run of consecutive dirty hours of a pool (gaps and islands over the queue's
key order), each run one index-range scan of its pool's raw buckets: a lateral the planner cannot
flatten (OFFSET 0). A join of the queue's rows to `pool_buckets` gave the planner a choice it got wrong
with a large queue (after a back-fill, before the rollup task caught up): it seq-scanned every pool's
raw buckets of the range and probed the queue per bucket, 35-45 s for a 30-day summary of 4 pools.

Clean hours are those NOT IN the dirty set of the range: a hashed subplan (one hash lookup per hour row;
a correlated NOT EXISTS against the usually empty queue became a nested loop costing ~1 µs per row).

`source()` returns a UNION ALL of three SELECTs producing the same columns: `raw` is a select list over a
`pool_buckets` row `b`, `hourly` over a `pool_buckets_hourly` row `b`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

HOUR = 3600
_ENABLED: ContextVar[bool] = ContextVar("specwatch_rollup_reads", default=True)


@contextmanager
def raw_only() -> Iterator[None]:
    """Read raw buckets only inside this block (the reference the rollup tests compare against)."""
    token = _ENABLED.set(False)
    try:
        yield
    finally:
        _ENABLED.reset(token)


@dataclass(frozen=True)
class Hours:
    """Whole hours [h1, h2) (unix seconds of hour starts) inside the END range (a, b]."""

    a: int
    b: int
    h1: int
    h2: int


def whole_hours(a: float, b: float, *, min_hours: int = 2) -> Hours | None:
    """The hours to read from rollups, or None (rollups off, or too few hours to be worth a union)."""
    if not _ENABLED.get():
        return None
    h1 = math.ceil(a / HOUR) * HOUR
    h2 = math.floor(b / HOUR) * HOUR
    if h2 - h1 < min_hours * HOUR:
        return None
    return Hours(int(a), int(b), h1, h2)


def _ts(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def source(raw: str, hourly: str, hours: Hours, *, width: int, raw_where: str = "TRUE",
           hourly_where: str = "TRUE") -> tuple[str, dict]:
    """SQL of the buckets' union (pool ids as :ids) and its parameters."""
    w = timedelta(seconds=width)
    params = {
        "r_lo": _ts(hours.a) - w, "r_e1": _ts(hours.h1) - w, "r_e2": _ts(hours.h2) - w, "r_hi": _ts(hours.b) - w,
        "r_h1": _ts(hours.h1), "r_h2": _ts(hours.h2), "r_w": w,
    }
    sql = f"""
        SELECT {raw} FROM pool_buckets b
        WHERE b.pool_id = ANY(:ids) AND ({raw_where})
          AND ((b.bucket_start > :r_lo AND b.bucket_start <= :r_e1) OR (b.bucket_start > :r_e2 AND b.bucket_start <= :r_hi))
        UNION ALL
        SELECT x.* FROM (
            SELECT g.pool_id, min(g.hour_start) AS h_lo, max(g.hour_start) AS h_hi
            FROM (SELECT d.pool_id, d.hour_start, d.hour_start - interval '1 hour'
                         * row_number() OVER (PARTITION BY d.pool_id ORDER BY d.hour_start) AS run
                  FROM rollup_dirty d
                  WHERE d.pool_id = ANY(:ids) AND d.hour_start >= :r_h1 AND d.hour_start < :r_h2) AS g
            GROUP BY g.pool_id, g.run) AS d
        CROSS JOIN LATERAL (
            SELECT {raw} FROM pool_buckets b
            WHERE b.pool_id = d.pool_id AND b.bucket_start > d.h_lo - CAST(:r_w AS interval)
              AND b.bucket_start <= d.h_hi + interval '1 hour' - CAST(:r_w AS interval)
              AND b.bucket_start > :r_lo AND b.bucket_start <= :r_hi  -- implied; constant: prunes partitions
              AND ({raw_where})
            OFFSET 0) AS x
        UNION ALL
        SELECT {hourly} FROM pool_buckets_hourly b
        WHERE b.pool_id = ANY(:ids) AND b.hour_start >= :r_h1 AND b.hour_start < :r_h2 AND ({hourly_where})
          AND (b.pool_id, b.hour_start) NOT IN (
                SELECT d.pool_id, d.hour_start FROM rollup_dirty d WHERE d.pool_id = ANY(:ids)
                AND d.hour_start >= :r_h1 AND d.hour_start < :r_h2)
    """
    return sql, params


def select(raw: str, hourly: str, hours: Hours | None, *, width: int, where: str = "TRUE") -> tuple[str, dict]:
    """The buckets' source for a read: routed as `source()` when there are whole hours to take from the
    rollups, else the raw buckets alone (bounds :lo / :hi, set by the caller, as for the edges)."""
    if hours is None:
        return (f"SELECT {raw} FROM pool_buckets b WHERE b.pool_id = ANY(:ids) AND b.bucket_start > :lo "
                f"AND b.bucket_start <= :hi AND ({where})"), {}
    return source(raw, hourly, hours, width=width, raw_where=where, hourly_where=where)


# window totals: the same partial sums from a raw bucket (`{band}`: the caller's band CASE) and an hour row
TOTALS_RAW = ("b.pool_id, {band} AS band_index, 1 AS n, b.drafts, b.draft_tokens, b.accepted_tokens, "
              "CASE WHEN b.accepted_per_pos IS NOT NULL THEN b.drafts END AS drafts_pp, "
              "cardinality(b.accepted_per_pos) AS pp_len, b.accepted_per_pos AS pp, b.generation_tokens AS gen, "
              "b.finished_requests AS fin, b.running_mean AS run_sum, (b.running_mean IS NOT NULL)::int AS run_n, "
              "b.itl_sum, b.itl_count, b.tpot_sum, b.tpot_count, b.restarts::int AS restarts, "
              "extract(epoch FROM b.bucket_start)::bigint + b.bucket_seconds AS last_end")
TOTALS_HOURLY = ("b.pool_id, NULLIF(b.band, -1)::int AS band_index, b.buckets, b.drafts, b.draft_tokens, "
                 "b.accepted_tokens, b.drafts_pp, b.pp_len::int, b.accepted_per_pos, b.generation_tokens, "
                 "b.finished_requests, b.running_sum, b.running_n, b.itl_sum, b.itl_count, b.tpot_sum, "
                 "b.tpot_count, b.restarts, b.last_end")
