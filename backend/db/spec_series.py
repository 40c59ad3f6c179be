"""Spec-decode counters as columns (numpy), the source of every acceptance series.

`spec_counters` returns the drafts / draft tokens / accepted tokens of the buckets whose END lies in
(a, b] for a set of pools, as flat arrays (pool id, end, three values; NaN = no value). Whole clean hours
come from `pool_spec_hourly`: its hour totals when the caller sums whole hours (grain a multiple of an
hour), else its packed per-bucket columns, which hold exactly the raw buckets' values. Both take the whole
UTC days inside their hours from `pool_spec_daily` instead: a whole-hour read its 24 packed hour totals a
row, a per-bucket read its day of packed per-bucket columns (days whose hours all pack them at the read's
width; 30 rows a pool for a month of 1-minute buckets, not 720 scattered hour rows). A day with a dirty
hour, or without such columns, comes from its clean hours in `pool_spec_hourly`. The partial-hour edges, dirty hours
(written since the rollup task last ran) and hours without usable per-bucket arrays come from
`pool_buckets`. It is one statement, hence one snapshot (see backend.db.routing for why that makes
the union exactly the raw buckets' set).

Hour rows are concatenated per pool inside Postgres (`string_agg` of the packed big-endian float64 columns,
or of `float8send` of the totals) and decoded with one `numpy.frombuffer` each; raw buckets (edges, dirty
hours) come packed per pool the same way. A 30-day 1-minute series of one pool is one row of three
346 KB byte strings, not 43,200 rows. `Float8ArrayLoader` does the same for float8[] (binary format)
elsewhere in the data layer.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from psycopg import RawCursor
from psycopg.adapt import Loader
from psycopg.pq import Format

from backend.db import routing
from backend.db.rollups import day_of
from backend.db.session import Reads, driver, is_tuned, tune_sql

FLOAT8_ARRAY_OID = 1022
_ELEMENT = np.dtype([("len", ">i4"), ("v", ">f8")])
_END_B = "(extract(epoch FROM b.bucket_start)::bigint + b.bucket_seconds)"
RAW, HOUR_TOTALS, HOUR_ARRAYS, DAY_TOTALS, DAY_ARRAYS = 0, 1, 2, 3, 4
MULTI_SLOT = (HOUR_ARRAYS, DAY_TOTALS, DAY_ARRAYS)  # kinds whose rows pack several slots each
COUNTERS = ("drafts", "draft_tokens", "accepted_tokens")
PACKED = {"drafts": "drafts_at", "draft_tokens": "draft_tokens_at", "accepted_tokens": "accepted_at"}
DAILY = {"drafts": "drafts_h", "draft_tokens": "draft_tokens_h", "accepted_tokens": "accepted_h"}
DAY = 86400
MIN_RUN = 4096  # slots: a smaller packed row is cheaper flattened than placed as a run (fixed numpy calls)
_PARAM = re.compile(r"(?<![:\w]):(\w+)")  # a `:name` parameter (not a `::type` cast)


class Float8ArrayLoader(Loader):
    """float8[] in binary format -> a float64 numpy array of the same shape (NULL elements -> NaN)."""

    format = Format.BINARY

    def load(self, data) -> np.ndarray:
        buf = bytes(data)
        ndim, has_null = struct.unpack_from("!ii", buf)
        if ndim == 0:
            return np.empty(0)
        dims = struct.unpack_from(f"!{2 * ndim}i", buf, 12)[::2]
        n = math.prod(dims)
        at = 12 + 8 * ndim
        if not has_null:
            return np.frombuffer(buf, dtype=_ELEMENT, count=n, offset=at)["v"].astype(np.float64).reshape(dims)
        out = np.full(n, np.nan)
        for i in range(n):
            (size,) = struct.unpack_from("!i", buf, at)
            at += 4
            if size >= 0:
                (out[i],) = struct.unpack_from("!d", buf, at)
                at += size
        return out.reshape(dims)


@dataclass
class PackedRows:
    """One pool's packed result row, kept as it came: `n` slots one grain wide per hour (or day), slot j of
    row r ending at last_end[r] - (n - 1 - j) * grain; values per counter (None: not read), rows * n each,
    as big-endian views of the packed bytes (NaN = no value). gridsum.Run is one counter of it."""

    pool_id: int
    last_end: np.ndarray  # int64
    n: int
    values: tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]  # in COUNTERS order


@dataclass
class SpecColumns:
    """Counters per bucket (or per hour): NaN where the bucket did not report the value. Packed rows whose
    slots are one grain wide stay packed in `runs` (gridsum.grain_sums places them whole, without a
    scatter); the flat arrays hold everything else."""

    pool_id: np.ndarray  # int64
    end: np.ndarray  # int64, unix seconds: end of the bucket (or hour)
    drafts: np.ndarray | None  # None: not read
    draft_tokens: np.ndarray | None
    accepted_tokens: np.ndarray | None
    rows: int = 0  # rows Postgres returned (raw buckets + hour rows)
    runs: list[PackedRows] = field(default_factory=list)
    lead_rows: list[tuple] | None = None  # spec_counters(lead=...)'s rows

    @classmethod
    def empty(cls) -> SpecColumns:
        z = np.empty(0)
        return cls(np.empty(0, np.int64), np.empty(0, np.int64), z, z.copy(), z.copy())


_AGG = "string_agg({}, ''::bytea)"
_IDS = "unnest(CAST(:ids AS integer[])) AS i(pool_id)"  # the read's pools, one row each (ids are distinct)
_NAN_HEX = "7ff8000000000000"  # float8send('NaN'), big-endian
_NAN8 = f"'\\x{_NAN_HEX}'::bytea"


def _packed_raw(where: str, counters: Sequence[str]) -> str:
    """Raw buckets packed per pool like the hour rows: one row per pool, its bucket ends and values as
    big-endian byte strings (NaN where a bucket did not report the value)."""
    values = ", ".join(_AGG.format(f"coalesce(float8send(b.{c}), {_NAN8})") if c in counters else "NULL::bytea"
                       for c in COUNTERS)
    return (f"SELECT {RAW} AS kind, b.pool_id, {_AGG.format(f'int8send({_END_B})')} AS e_at, {values} "
            f"FROM pool_buckets b WHERE {where} GROUP BY b.pool_id")


def spec_counters(session: Reads, *, pool_ids: Sequence[int], a: int, b: int, bucket_seconds: int,
                  grain: int, counters: Sequence[str] = COUNTERS, lead: str | None = None) -> SpecColumns:
    """Counters of the buckets whose END lies in (a, b] (unix seconds). grain: the caller sums into
    grains of this many seconds; whole hours are read as hour totals when it is a multiple of an hour.
    counters: the ones to read (the others come back all NaN), e.g. an acceptance rate needs two.
    lead: a statement without parameters sent first in the same round trip; its rows are `lead_rows`."""
    if any(c not in COUNTERS for c in counters):
        raise ValueError(f"unknown counter in {counters!r}")
    if not pool_ids or b <= a:
        out = SpecColumns.empty()
        if lead:
            with driver(session) as conn:
                out.lead_rows = RawCursor(conn).execute(lead, prepare=True, binary=True).fetchall()
        return out
    w = bucket_seconds
    params: dict = {"ids": list(pool_ids), "w": w, "lo": routing._ts(a - w), "hi": routing._ts(b - w)}
    hours = routing.whole_hours(a, b, min_hours=1)
    if hours is None:
        sql = _packed_raw("b.pool_id = ANY(:ids) AND b.bucket_start > :lo AND b.bucket_start <= :hi", counters)
    else:
        totals = grain % routing.HOUR == 0
        params |= {"r_lo": routing._ts(a - w), "r_e1": routing._ts(hours.h1 - w), "r_e2": routing._ts(hours.h2 - w),
                   "r_hi": routing._ts(b - w), "r_h1": routing._ts(hours.h1), "r_h2": routing._ts(hours.h2)}
        packed = "h.bucket_seconds = :w"  # a NULL column is an hour where no bucket reported that counter
        # the raw part: the partial-hour edges, and the hours taken from raw buckets (dirty ones, and for
        # per-bucket reads those without columns of width w: spec_raw_hours, migration 0009, which names
        # pool_buckets only when there is such an hour)
        edges = ("b.pool_id = ANY(:ids) AND ((b.bucket_start > :r_lo AND b.bucket_start <= :r_e1) "
                 "OR (b.bucket_start > :r_e2 AND b.bucket_start <= :r_hi))")
        dirty = ("SELECT d.pool_id, d.hour_start FROM rollup_dirty d WHERE d.pool_id = ANY(:ids) "
                 "AND d.hour_start >= :r_h1 AND d.hour_start < :r_h2")
        raw_hours = ", ".join(f"r.{c}" if c in counters else "NULL::bytea" for c in COUNTERS)
        raw_hours_of = f"spec_raw_hours(CAST(:ids AS integer[]), :r_h1, :r_h2, :w, {'false' if totals else 'true'}) r"
        if totals:  # only dirty hours qualify: no call at all (a PL/pgSQL call costs ~0.1 ms) while none is
            raw_hours_of = f"(SELECT WHERE EXISTS ({dirty})) AS g CROSS JOIN LATERAL {raw_hours_of}"
        taken = f"SELECT {RAW}, r.pool_id, r.e_at, {raw_hours} FROM {raw_hours_of}"
        # one row per pool: the hour ends, and the hour totals or the per-bucket columns, each packed. No
        # ORDER BY: the aggregates of one group consume its rows in one and the same order, and the ends
        # travel with the values, so no sort is needed.
        hour_cols = ", ".join(
            "NULL::bytea" if c not in counters
            else _AGG.format(f"float8send(coalesce(h.{c}, 'NaN'))") if totals
            else _AGG.format(f"coalesce(h.{PACKED[c]}, decode(repeat('{_NAN_HEX}', 3600 / h.bucket_seconds), 'hex'))")
            for c in COUNTERS)
        hour_ends = _AGG.format("int8send(extract(epoch FROM h.hour_start)::bigint + 3600)")
        hour_select = f"SELECT {HOUR_TOTALS if totals else HOUR_ARRAYS}, h.pool_id, {hour_ends}, {hour_cols}"
        usable = "" if totals else f"AND {packed}"

        def hour_rows(*spans: tuple[str, str]) -> str:
            # per pool, a lateral aggregate over the primary key (rows in key order): a GROUP BY over
            # `pool_id = ANY(:ids)` had the generic plan bitmap-scan and sort every hour row of the read
            # (7 MB for 10 pools x 30 days of per-minute columns: a sort spilled to disk). Several spans
            # [lo, hi) of hours are one aggregate over a range scan each: a part of its own costs every
            # execution ~0.1 ms, and an OR of the ranges let the planner scan one of them for every pool.
            scans = " UNION ALL ".join(f"SELECT * FROM pool_spec_hourly WHERE pool_id = i.pool_id "
                                       f"AND hour_start >= :{lo} AND hour_start < :{hi}" for lo, hi in spans)
            return f"""
            SELECT {HOUR_TOTALS if totals else HOUR_ARRAYS}, i.pool_id, x.* FROM {_IDS}
            CROSS JOIN LATERAL (
                SELECT {hour_ends} AS e_at, {hour_cols}
                FROM ({scans}) h
                WHERE (h.pool_id, h.hour_start) NOT IN ({dirty}) {usable}) x
            WHERE x.e_at IS NOT NULL"""

        days = _whole_days(hours)
        if days is None:
            hour_part = hour_rows(("r_h1", "r_h2"))
        else:  # whole clean days from pool_spec_daily; the hours around them, and the hours of the other days
            params |= {"r_d1": routing._ts(days[0]), "r_d2": routing._ts(days[1])}
            dirty_days = (f"SELECT DISTINCT d.pool_id, {day_of('d.hour_start')} AS day_start FROM rollup_dirty d "
                          "WHERE d.pool_id = ANY(:ids) AND d.hour_start >= :r_d1 AND d.hour_start < :r_d2")
            if totals:  # the day's 24 hour totals
                day_cols = ", ".join("NULL::bytea" if c not in counters else _AGG.format(f"s.{DAILY[c]}")
                                     for c in COUNTERS)
                other_days, usable_day = dirty_days, ""
            else:  # the day's per-bucket columns, when its hours all pack them at width w
                nan_day = f"decode(repeat('{_NAN_HEX}', 86400 / s.bucket_seconds), 'hex')"
                day_cols = ", ".join("NULL::bytea" if c not in counters
                                     else _AGG.format(f"coalesce(s.{PACKED[c]}, {nan_day})") for c in COUNTERS)
                other_days = (f"{dirty_days} UNION SELECT s.pool_id, s.day_start FROM pool_spec_daily s "
                              "WHERE s.pool_id = ANY(:ids) AND s.day_start >= :r_d1 AND s.day_start < :r_d2 "
                              "AND s.bucket_seconds <> :w")
                usable_day = "AND s.bucket_seconds = :w"
            hour_part = f"""{hour_rows(("r_h1", "r_d1"), ("r_d2", "r_h2"))}
            UNION ALL
            {hour_select}
            FROM ({other_days}) AS dd
            JOIN pool_spec_hourly h ON h.pool_id = dd.pool_id AND h.hour_start >= dd.day_start
                 AND h.hour_start < dd.day_start + interval '1 day'
            WHERE (h.pool_id, h.hour_start) NOT IN ({dirty}) {usable}
            GROUP BY h.pool_id
            UNION ALL
            SELECT {DAY_TOTALS if totals else DAY_ARRAYS}, i.pool_id, x.* FROM {_IDS}
            CROSS JOIN LATERAL (
                SELECT {_AGG.format("int8send(extract(epoch FROM s.day_start)::bigint + 86400)")} AS e_at, {day_cols}
                FROM pool_spec_daily s
                WHERE s.pool_id = i.pool_id AND s.day_start >= :r_d1 AND s.day_start < :r_d2 {usable_day}
                  AND (s.pool_id, s.day_start) NOT IN ({dirty_days})) x
            WHERE x.e_at IS NOT NULL"""
        # (per pool, as hour_rows: a GROUP BY had the generic plan bitmap-scan the day index and sort)
        # a range on hour boundaries has no edges: leaving the part out spares every execution the
        # start-up of its per-partition scans (a generic plan keeps them all)
        edge_part = f"{_packed_raw(edges, counters)}\n            UNION ALL" if (a, b) != (hours.h1, hours.h2) else ""
        sql = f"""
            {edge_part}
            {taken}
            UNION ALL{hour_part}
        """
    lead_rows, rows = pipelined_rows(session, sql, params, lead=lead)
    out = _columns(rows, w, counters, grain=grain)
    out.lead_rows = lead_rows
    return out


def _whole_days(hours: routing.Hours) -> tuple[int, int] | None:
    """The whole UTC days [d1, d2) inside the hours [h1, h2) (unix seconds), or None if there is none."""
    d1, d2 = -(-hours.h1 // DAY) * DAY, hours.h2 // DAY * DAY
    return (d1, d2) if d2 > d1 else None


def binary_rows(session: Reads, sql: str, params: dict) -> list[tuple]:
    """Execute an analytic read with binary results, float8[] decoded by Float8ArrayLoader, under `tune`'s
    settings, sent with it in one round trip (a pipeline; not sent on a connection that already has them,
    ReadPool's). The statement is prepared on the connection at
    its first execution (psycopg would wait for the fifth) and runs on its generic plan
    (`tune(generic_plans=True)`), so later executions skip planning. `:name` parameters become `$n` once
    per statement text (`native_query`), so psycopg's parser never reads these multi-kilobyte statements
    (it caches only those under 4 KB)."""
    return pipelined_rows(session, sql, params)[1]


def pipelined_rows(session: Reads, sql: str, params: dict, *, lead: str | None = None
                   ) -> tuple[list[tuple] | None, list[tuple]]:
    """binary_rows, with `lead` (a statement without parameters, e.g. pool_list.SQL) sent first in the
    same round trip: (lead's rows or None, the read's rows). Each is its own statement (autocommit
    sessions: its own snapshot), so a caller relating them must allow for a change in between."""
    query, names = native_query(sql)
    with driver(session) as conn:
        cursor = RawCursor(conn)
        cursor.adapters.register_loader(FLOAT8_ARRAY_OID, Float8ArrayLoader)
        first = RawCursor(conn) if lead else None
        with conn.pipeline():
            if first is not None:
                first.execute(lead, prepare=True, binary=True)
            if not is_tuned(session):
                conn.execute(_TUNE)
            cursor.execute(query, [params[n] for n in names], prepare=True, binary=True)
        return (first.fetchall() if first is not None else None), cursor.fetchall()


_TUNE = tune_sql(generic_plans=True)


@lru_cache(maxsize=512)
def native_query(sql: str) -> tuple[str, tuple[str, ...]]:
    """`:name` placeholders (SQLAlchemy text style) as Postgres's `$n`, and the names in `$n` order (a name
    used twice is one parameter)."""
    names: list[str] = []

    def number(m: re.Match) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    return _PARAM.sub(number, sql), tuple(names)


def _columns(rows: list[tuple], width: int, counters: Sequence[str], *, grain: int) -> SpecColumns:
    """Flatten the packed rows: a raw row's ends are its buckets'; an hour-totals row has one value per
    hour end; an hour's packed columns one per bucket, slot j of an hour ending at E being the bucket that
    ends at E - (n - 1 - j) * width. Packed rows (per-bucket hours, day totals) whose slots are `grain`
    seconds wide are kept as PackedRows instead, when they hold at least MIN_RUN slots. Counters not read
    stay None.

    Consecutive rows of one kind are decoded together (their byte strings joined, one frombuffer per
    column), so the cost does not grow with the number of pools; the entries keep the rows' order."""
    wanted = [c in counters for c in COUNTERS]
    batches: list[tuple[int, list[tuple]]] = []  # consecutive flat rows of one kind
    runs = []
    for row in rows:
        kind, pool, e_at = row[0], row[1], row[2]
        if kind in MULTI_SLOT:
            n, step = _slots(kind, width)
            if step == grain and len(e_at) // 8 * n >= MIN_RUN:
                runs.append(PackedRows(pool, np.frombuffer(e_at, ">i8").astype(np.int64), n,
                                       tuple(np.frombuffer(x, ">f8") if w else None for w, x in zip(wanted, row[3:]))))
                continue
        if batches and batches[-1][0] == kind:
            batches[-1][1].append(row)
        else:
            batches.append((kind, [row]))
    parts = [_flatten(kind, batch, width, wanted) for kind, batch in batches]
    if not parts:
        out = SpecColumns.empty()
    else:
        out = SpecColumns(*[np.concatenate([p[i] for p in parts]) if i < 2 or wanted[i - 2] else None
                            for i in range(5)])
    out.rows, out.runs = len(rows), runs
    return out


def _slots(kind: int, width: int) -> tuple[int, int]:
    """Slots per row of a multi-slot kind (MULTI_SLOT) and their width in seconds."""
    return {HOUR_ARRAYS: (3600 // width, width), DAY_TOTALS: (24, 3600), DAY_ARRAYS: (86400 // width, width)}[kind]


def _flatten(kind: int, batch: list[tuple], width: int, wanted: list[bool]) -> tuple:
    """Rows of one kind as flat entries, in row order: (pool ids, ends, value per counter or None)."""
    sizes = np.fromiter((len(r[2]) // 8 for r in batch), np.int64, len(batch))
    pools = np.repeat(np.fromiter((r[1] for r in batch), np.int64, len(batch)), sizes)
    ends = np.frombuffer(b"".join(r[2] for r in batch), ">i8").astype(np.int64)
    if kind in MULTI_SLOT:  # n slots of `step` seconds per row, the last ending at its end
        n, step = _slots(kind, width)
        ends = (ends[:, None] - (np.arange(n - 1, -1, -1, dtype=np.int64) * step)[None, :]).ravel()
        pools = np.repeat(pools, n)
    values = [np.frombuffer(b"".join(r[3 + j] for r in batch), ">f8").astype(np.float64) if w else None
              for j, w in enumerate(wanted)]
    for v in values:
        if v is not None and v.size != ends.size:
            raise ValueError(f"packed rows of kind {kind}: {v.size} values for {ends.size} slots")
    return (pools, ends, *values)
