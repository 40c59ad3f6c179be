"""Storage maintenance SQL: daily partitions of pool_buckets, and the hourly rollups.

Partitions are named pool_buckets_pYYYYMMDD and hold bucket_start in [day, day + 1) UTC. They are created
ahead by the storage task and, for a back-fill into a day that has none, by the write path in the same
transaction; retention drops whole partitions (no DELETE, no vacuum debt).

Rollups: every write to pool_buckets marks (pool, hour of the bucket's END) in rollup_dirty from a statement
trigger, in the writing transaction. `maintain` takes a batch of dirty hours (SKIP LOCKED, so runs may
overlap) and recomputes each one from the raw buckets in the same transaction: a late back-fill into an
already rolled-up hour simply marks it dirty again. The task takes an hour only once it has ended (an hour
still filling would be recomputed at every collection, and every read takes its buckets raw as a partial
hour anyway); its last buckets, collected after the hour, mark it dirty again. The same run rewrites pool_spec_hourly for those
hours and pool_spec_daily (hour totals and per-bucket columns) for their days. Rollup retention deletes
whole UTC days of all three. Reads (backend.db.queries) use a rollup row only for hours that are not
dirty, so a lagging task costs speed, never correctness.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.orm import Session

from backend.db import data_version
from backend.db.models_perf import NO_BAND, NO_LAYOUT
from backend.domain.bands import BAND_EDGES

PARTITION_PREFIX = "pool_buckets_p"
_LOCK = "specwatch.pool_buckets.partitions"
END = "(extract(epoch FROM b.bucket_start)::bigint + b.bucket_seconds)"
HOUR_OF_END = "to_timestamp(floor((extract(epoch FROM bucket_start) + bucket_seconds - 1) / 3600) * 3600)"


def day_of(column: str) -> str:
    """The UTC day (timestamptz at midnight) of a timestamptz column, whatever the session's time zone."""
    return f"to_timestamp(floor(extract(epoch FROM {column}) / 86400) * 86400)"


def band_sql(column: str = "running_mean", edges: Iterable[float] = BAND_EDGES, null: str = "NULL") -> str:
    edges = list(edges)
    return (f"CASE WHEN {column} IS NULL OR {column} <= 0 THEN {null} "
            + " ".join(f"WHEN {column} <= {float(e)!r} THEN {i}" for i, e in enumerate(edges))
            + f" ELSE {len(edges)} END")


def partition_name(day: date) -> str:
    return f"{PARTITION_PREFIX}{day:%Y%m%d}"


def ensure_partitions(session: Session, days: Iterable[date]) -> list[str]:
    """Create the missing daily partitions for `days`; returns the names created."""
    wanted = sorted(set(days))
    if not wanted:
        return []
    names = [partition_name(d) for d in wanted]
    missing = session.execute(text("SELECT n FROM unnest(CAST(:n AS text[])) AS n WHERE to_regclass(n) IS NULL"),
                              {"n": names}).scalars().all()
    if not missing:
        return []
    session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": _LOCK})
    made = []
    for day in wanted:
        name = partition_name(day)
        if name not in missing:
            continue
        session.execute(text(f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF pool_buckets FOR VALUES FROM "
                             f"('{day.isoformat()} 00:00:00+00') TO ('{(day + timedelta(days=1)).isoformat()} 00:00:00+00')"))
        made.append(name)
    return made


def partitions(session: Session) -> list[tuple[str, date]]:
    rows = session.execute(text("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                                "WHERE i.inhparent = 'pool_buckets'::regclass ORDER BY 1")).scalars()
    out = []
    for name in rows:
        suffix = name.removeprefix(PARTITION_PREFIX)
        if len(suffix) == 8 and suffix.isdigit():
            out.append((name, datetime.strptime(suffix, "%Y%m%d").date()))
    return out


def drop_partitions_before(session: Session, day: date) -> list[str]:
    """Drop the daily partitions wholly before `day` (retention); returns their names."""
    session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": _LOCK})
    dropped = []
    for name, d in partitions(session):
        if d < day:
            session.execute(text(f"DROP TABLE {name}"))
            dropped.append(name)
    if dropped:
        data_version.bump(session)  # a dropped partition fires no trigger
    return dropped


def delete_rollups_before(session: Session, before: datetime) -> int:
    """Delete the rollups of the whole UTC days before `before`'s day (hourly and daily alike, so a day's
    row in pool_spec_daily always sums the hour rows that exist); returns the pool_buckets_hourly rows deleted."""
    before = datetime.combine(before.astimezone(UTC).date(), datetime.min.time(), UTC)
    session.execute(text("DELETE FROM pool_spec_daily WHERE day_start < :t"), {"t": before})
    session.execute(text("DELETE FROM pool_spec_hourly WHERE hour_start < :t"), {"t": before})
    return session.execute(text("DELETE FROM pool_buckets_hourly WHERE hour_start < :t"), {"t": before}).rowcount or 0


def _hour_buckets(max_width: int) -> str:
    """The raw buckets of the taken hour t (END in (t, t + 1 h]). LATERAL makes it one primary-key range
    scan per hour: as a plain join the planner may hash-join on pool_id alone and filter every row of
    every partition against every taken hour of the pool (OFFSET 0 keeps the subquery from being pulled
    back up into such a join)."""
    return (f"SELECT * FROM pool_buckets b WHERE b.pool_id = t.pool_id "
            f"AND b.bucket_start >= t.hour_start - make_interval(secs => {int(max_width)}) "
            f"AND b.bucket_start < t.hour_start + interval '1 hour' "
            f"AND {END} > extract(epoch FROM t.hour_start)::bigint "
            f"AND {END} <= extract(epoch FROM t.hour_start)::bigint + 3600 OFFSET 0")


def _sums(column: str, n: int) -> str:
    if n <= 0:
        return "NULL"
    return (f"(ARRAY[{', '.join(f'sum(b.{column}[{i}])' for i in range(1, n + 1))}])"
            f"[1:max(cardinality(b.{column}))]")


@dataclass
class MaintainResult:
    taken: int = 0  # dirty (pool, hour) entries consumed
    hours: int = 0  # rollup rows written
    more: bool = False  # the queue held more than one batch


FAR = datetime(9999, 1, 1, tzinfo=UTC)


def maintain(session: Session, *, limit: int = 20000, keep_from: datetime | None = None,
             max_width: int = 3600, ended_by: datetime | None = None) -> MaintainResult:
    """Recompute up to `limit` dirty (pool, hour) rollups from the raw buckets (one transaction).

    Hours before keep_from (the raw retention) are only dequeued: their raw partitions are gone, so a
    recompute would replace a complete rollup with whatever is left. max_width: the widest bucket stored.
    ended_by: only hours that ended by then are taken (None: every one); an hour still filling stays queued,
    so it is read from the raw buckets, as every read reads a partial hour anyway, and is rolled up once,
    after it ends, instead of at every collection."""
    res = MaintainResult()
    session.execute(text("CREATE TEMP TABLE IF NOT EXISTS _rollup_taken (pool_id integer, hour_start timestamptz) "
                         "ON COMMIT DELETE ROWS"))
    ended = {"ended": (ended_by or FAR) - timedelta(hours=1)}
    res.taken = session.execute(text("""
        WITH t AS (
            DELETE FROM rollup_dirty WHERE (pool_id, hour_start) IN (
                SELECT pool_id, hour_start FROM rollup_dirty WHERE hour_start <= :ended
                ORDER BY hour_start LIMIT :n FOR UPDATE SKIP LOCKED)
            RETURNING pool_id, hour_start)
        INSERT INTO _rollup_taken SELECT pool_id, hour_start FROM t WHERE hour_start >= :keep
    """), {"n": limit, "keep": keep_from or datetime(1970, 1, 1, tzinfo=UTC), **ended}).rowcount or 0
    if res.taken == 0:
        return res
    res.more = session.execute(text("SELECT EXISTS (SELECT 1 FROM rollup_dirty WHERE hour_start <= :ended)"),
                               ended).scalar_one()
    n_counts = session.execute(text("SELECT coalesce(max(cardinality(bounds)), -1) + 1 FROM histogram_layouts")
                               ).scalar_one()
    n_pos = max(1, session.execute(text("SELECT coalesce(max(num_spec_tokens), 0) FROM pools")).scalar_one())
    session.execute(text("ANALYZE _rollup_taken"))
    session.execute(text("DELETE FROM pool_buckets_hourly h USING _rollup_taken t "
                         "WHERE h.pool_id = t.pool_id AND h.hour_start = t.hour_start"))
    hist = ", ".join(f"{_sums(f'{f}_buckets', n_counts)}, sum(b.{f}_sum), sum(b.{f}_count)"
                     for f in ("itl", "tpot", "ttft"))
    res.hours = session.execute(text(f"""
        INSERT INTO pool_buckets_hourly (pool_id, hour_start, band, itl_layout_id, tpot_layout_id, ttft_layout_id,
            buckets, drafts, draft_tokens, accepted_tokens, drafts_pp, accepted_per_pos, pp_len,
            itl_buckets, itl_sum, itl_count, tpot_buckets, tpot_sum, tpot_count, ttft_buckets, ttft_sum, ttft_count,
            generation_tokens, prompt_tokens, finished_requests, preemptions, running_sum, running_n, restarts,
            last_end)
        SELECT t.pool_id, t.hour_start, {band_sql("b.running_mean", null=str(NO_BAND))} AS band,
               coalesce(b.itl_layout_id, {NO_LAYOUT}), coalesce(b.tpot_layout_id, {NO_LAYOUT}),
               coalesce(b.ttft_layout_id, {NO_LAYOUT}), count(*),
               sum(b.drafts), sum(b.draft_tokens), sum(b.accepted_tokens),
               sum(b.drafts) FILTER (WHERE b.accepted_per_pos IS NOT NULL),
               {_sums("accepted_per_pos", max(n_pos, 32))}, max(cardinality(b.accepted_per_pos)),
               {hist},
               sum(b.generation_tokens), sum(b.prompt_tokens), sum(b.finished_requests), sum(b.preemptions),
               sum(b.running_mean), count(b.running_mean), sum(b.restarts), max({END})
        FROM _rollup_taken t
        CROSS JOIN LATERAL ({_hour_buckets(max_width)}) AS b
        GROUP BY 1, 2, 3, 4, 5, 6
    """)).rowcount or 0
    _spec_hours(session, max_width)
    _spec_days(session)
    return res


def _dense(values: str) -> str:
    """The per-bucket column of an hour, packed: slot j (1-based) holds the bucket ending at
    hour_start + j * w as 8 big-endian bytes (float8send), NaN where there is none."""
    return (f"(SELECT string_agg(float8send(coalesce(u.v, 'NaN')), ''::bytea ORDER BY g) "
            f"FROM generate_series(1, 3600 / s.w) AS g LEFT JOIN unnest(s.j, s.{values}) AS u(i, v) ON u.i = g)")


def _spec_hours(session: Session, max_width: int) -> None:
    """pool_spec_hourly for the taken hours: totals, and per-bucket arrays when the hour's buckets share one
    width that divides the hour and end on multiples of it. A counter no bucket of the hour reported (every
    counter, on a baseline pool) gets no array: NULL reads as all-NaN slots, 1.4 KB a row saved."""
    session.execute(text("DELETE FROM pool_spec_hourly h USING _rollup_taken t "
                         "WHERE h.pool_id = t.pool_id AND h.hour_start = t.hour_start"))
    session.execute(text(f"""
        INSERT INTO pool_spec_hourly (pool_id, hour_start, bucket_seconds, drafts, draft_tokens, accepted_tokens,
                                      drafts_at, draft_tokens_at, accepted_at)
        SELECT s.pool_id, s.hour_start, CASE WHEN s.ok THEN s.w ELSE 0 END, s.d, s.dt, s.a,
               CASE WHEN s.ok AND s.d IS NOT NULL THEN {_dense("dv")} END,
               CASE WHEN s.ok AND s.dt IS NOT NULL THEN {_dense("dtv")} END,
               CASE WHEN s.ok AND s.a IS NOT NULL THEN {_dense("av")} END
        FROM (
            SELECT t.pool_id, t.hour_start, min(b.bucket_seconds) AS w,
                   min(b.bucket_seconds) = max(b.bucket_seconds) AND 3600 % min(b.bucket_seconds) = 0
                       AND bool_and({END} % b.bucket_seconds = 0) AS ok,
                   sum(b.drafts) AS d, sum(b.draft_tokens) AS dt, sum(b.accepted_tokens) AS a,
                   array_agg(({END} - extract(epoch FROM t.hour_start)::bigint) / b.bucket_seconds) AS j,
                   array_agg(b.drafts) AS dv, array_agg(b.draft_tokens) AS dtv, array_agg(b.accepted_tokens) AS av
            FROM _rollup_taken t
            CROSS JOIN LATERAL ({_hour_buckets(max_width)}) AS b
            GROUP BY 1, 2
        ) AS s
    """))


def _spec_days(session: Session) -> None:
    """pool_spec_daily for the days of the taken hours, rebuilt from their pool_spec_hourly rows. Totals: slot
    j of a counter is the total of the hour starting at day_start + j h (NaN: no hour row, or no value).
    Per-bucket columns, when every hour row of the day packs them at one width w: the hours' columns back
    to back (an hour without a row, or without the counter, as 3600 / w NaN slots; NULL when no hour has
    the counter), else bucket_seconds 0 and no columns. A day whose hours are all gone gets no row. Reads
    skip a day with a dirty hour, so a day rebuilt while another of its hours waits in the queue is never
    read stale."""
    days = f"SELECT DISTINCT pool_id, {day_of('hour_start')} AS day_start FROM _rollup_taken"
    session.execute(text(f"DELETE FROM pool_spec_daily s USING ({days}) t "
                         "WHERE s.pool_id = t.pool_id AND s.day_start = t.day_start"))
    hours = ", ".join(f"string_agg(float8send(coalesce(h.{c}, 'NaN')), ''::bytea ORDER BY g.i)"
                      for c in ("drafts", "draft_tokens", "accepted_tokens"))
    nan = "decode(repeat('7ff8000000000000', 3600 / nullif(t.w, 0)), 'hex')"  # an hour of NaN slots
    arrays = ", ".join(f"CASE WHEN t.w > 0 AND bool_or(h.{c} IS NOT NULL) "
                       f"THEN string_agg(coalesce(h.{c}, {nan}), ''::bytea ORDER BY g.i) END"
                       for c in ("drafts_at", "draft_tokens_at", "accepted_at"))
    session.execute(text(f"""
        INSERT INTO pool_spec_daily (pool_id, day_start, drafts_h, draft_tokens_h, accepted_h,
                                     bucket_seconds, drafts_at, draft_tokens_at, accepted_at)
        SELECT t.pool_id, t.day_start, {hours}, t.w, {arrays}
        FROM (SELECT d.pool_id, d.day_start,
                     (SELECT CASE WHEN min(x.bucket_seconds) = max(x.bucket_seconds) AND min(x.bucket_seconds) > 0
                             THEN min(x.bucket_seconds) ELSE 0 END
                      FROM pool_spec_hourly x WHERE x.pool_id = d.pool_id AND x.hour_start >= d.day_start
                        AND x.hour_start < d.day_start + interval '1 day') AS w
              FROM ({days}) AS d) AS t
        CROSS JOIN generate_series(0, 23) AS g(i)
        LEFT JOIN pool_spec_hourly h ON h.pool_id = t.pool_id AND h.hour_start = t.day_start + g.i * interval '1 hour'
        GROUP BY t.pool_id, t.day_start, t.w
        HAVING count(h.pool_id) > 0
    """))


def dirty_count(session: Session) -> int:
    return session.execute(text("SELECT count(*) FROM rollup_dirty")).scalar_one()
