"""SQL of per-request acceptance: record rows (bulk COPY, idempotent by request id), label values, the
additive bucket sums they add to `pool_buckets`, the distribution reads and retention. Nothing here commits."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

from backend.db import rollups
from backend.db.repositories import _day

_STAGING = ("CREATE TEMP TABLE IF NOT EXISTS _request_records_in "
            "(LIKE request_records INCLUDING DEFAULTS) ON COMMIT DELETE ROWS; TRUNCATE _request_records_in")
_COLS = ("request_id", "pool_id", "finish_time", "labels", "output_tokens", "num_spec_tokens", "steps",
         "draft_tokens", "accepted", "histogram", "received_at")
_COPY = f"COPY _request_records_in ({', '.join(_COLS)}) FROM STDIN"
_MERGE = (f"INSERT INTO request_records ({', '.join(_COLS)}) SELECT {', '.join(_COLS)} FROM _request_records_in "
          "ON CONFLICT (request_id) DO NOTHING RETURNING request_id")
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_text(value: str) -> str:
    """A value in COPY's text format (backslash, tab, newline and carriage return escaped)."""
    return value.translate(_ESCAPES)


def insert_records(session: Session, rows: Sequence[tuple]) -> list[str]:
    """COPY rows (in _COLS order: labels a dict, histogram a list, times datetimes; unique request ids) into
    a staging table and insert the ones whose request id is new; returns those ids (a retried batch: none).
    The COPY payload is written as one text block (psycopg's per-value adaptation was most of the cost)."""
    if not rows:
        return []
    cursor = session.connection().connection.driver_connection.cursor()
    cursor.execute(_STAGING)
    lines = []
    for rid, pid, fin, labels, out, k, steps, drafted, acc, hist, received in rows:
        lines.append(f"{_copy_text(rid)}\t{pid}\t{fin.isoformat()}\t"
                     f"{_copy_text(json.dumps(labels, separators=(',', ':')))}\t{out}\t{k}\t{steps}\t{drafted}\t"
                     f"{acc}\t{{{','.join(map(str, hist))}}}\t{received.isoformat()}\n")
    with cursor.copy(_COPY) as copy:
        copy.write("".join(lines))
    cursor.execute(_MERGE)
    return [row[0] for row in cursor.fetchall()]


def touch_known_labels(session: Session, pairs: set[tuple[str, str]], now: datetime) -> set[tuple[str, str]]:
    """Mark the known pairs among `pairs` seen now; returns them (the others are new)."""
    rows = session.execute(text(
        "UPDATE request_label_values SET last_seen = greatest(last_seen, :now) WHERE (label, value) IN "
        "(SELECT * FROM unnest(CAST(:n AS varchar[]), CAST(:v AS varchar[]))) RETURNING label, value"),
        {"n": [n for n, _ in pairs], "v": [v for _, v in pairs], "now": now}).all()
    return {(n, v) for n, v in rows}


def label_counts(session: Session, names: set[str]) -> dict[str, int]:
    return dict(session.execute(text(
        "SELECT label, count(*) FROM request_label_values WHERE label = ANY(:n) GROUP BY label"),
        {"n": sorted(names)}).all())


def lock_labels(session: Session) -> None:
    """Serialise batches that add label values, so two of them cannot both pass the limit."""
    session.execute(text("SELECT pg_advisory_xact_lock(hashtext('specwatch.request_label_values'))"))


def add_label_values(session: Session, pairs: set[tuple[str, str]], now: datetime) -> None:
    session.execute(text(
        "INSERT INTO request_label_values (label, value, first_seen, last_seen) "
        "SELECT n, v, :now, :now FROM unnest(CAST(:n AS varchar[]), CAST(:v AS varchar[])) AS t(n, v) "
        "ON CONFLICT (label, value) DO UPDATE SET last_seen = greatest(request_label_values.last_seen, :now)"),
        {"n": [n for n, _ in pairs], "v": [v for _, v in pairs], "now": now})


_UPSERT_POOLS = text("""
    INSERT INTO pools (model_name, traffic_class, spec_mode, first_seen, last_seen, num_spec_tokens, origin)
    SELECT m, c, s, f, l, k, 'requests'
    FROM unnest(CAST(:m AS varchar[]), CAST(:c AS varchar[]), CAST(:s AS varchar[]),
                CAST(:f AS timestamptz[]), CAST(:l AS timestamptz[]), CAST(:k AS smallint[])) AS t(m, c, s, f, l, k)
    ON CONFLICT (model_name, traffic_class, spec_mode) DO UPDATE SET
        first_seen = least(pools.first_seen, excluded.first_seen),
        last_seen = greatest(pools.last_seen, excluded.last_seen),
        num_spec_tokens = coalesce(excluded.num_spec_tokens, pools.num_spec_tokens)
    RETURNING id, model_name, traffic_class, spec_mode, origin
""")


def upsert_request_pools(session: Session, seen: dict[tuple[str, str, str], tuple[datetime, datetime, int]]
                         ) -> dict[tuple[str, str, str], tuple[int, str]]:
    """Pools of per-request sums, keyed (model, class, spec mode) -> (first start, last end, K); returns
    key -> (pool id, origin). An existing engine pool under the same key keeps its origin (the caller
    refuses to add to it)."""
    if not seen:
        return {}
    keys = sorted(seen)
    params = {"m": [k[0] for k in keys], "c": [k[1] for k in keys], "s": [k[2] for k in keys],
              "f": [seen[k][0] for k in keys], "l": [seen[k][1] for k in keys], "k": [seen[k][2] for k in keys]}
    return {(m, c, s): (pid, origin) for pid, m, c, s, origin in session.execute(_UPSERT_POOLS, params)}


_SUMS_STAGING = ("CREATE TEMP TABLE IF NOT EXISTS _request_sums_in (pool_id int, bucket_start timestamptz, "
                 "bucket_seconds int, drafts float8, draft_tokens float8, accepted float8, per_pos float8[], "
                 "generation_tokens float8, finished_requests float8) ON COMMIT DELETE ROWS; "
                 "TRUNCATE _request_sums_in")
_SUMS_COPY = ("COPY _request_sums_in (pool_id, bucket_start, bucket_seconds, drafts, draft_tokens, accepted, per_pos, "
              "generation_tokens, finished_requests) FROM STDIN")
_ADD_BUCKETS = """
    INSERT INTO pool_buckets AS b (pool_id, bucket_start, bucket_seconds, drafts, draft_tokens, accepted_tokens,
                                   accepted_per_pos, generation_tokens, finished_requests, source, collected_at)
    SELECT pool_id, bucket_start, bucket_seconds, drafts, draft_tokens, accepted, per_pos, generation_tokens,
           finished_requests, 'requests', %(now)s FROM _request_sums_in
    ON CONFLICT (pool_id, bucket_start) DO UPDATE SET
        drafts = coalesce(b.drafts, 0) + excluded.drafts,
        draft_tokens = coalesce(b.draft_tokens, 0) + excluded.draft_tokens,
        accepted_tokens = coalesce(b.accepted_tokens, 0) + excluded.accepted_tokens,
        accepted_per_pos = CASE WHEN b.accepted_per_pos IS NULL THEN excluded.accepted_per_pos
            ELSE ARRAY(SELECT coalesce(b.accepted_per_pos[i], 0) + coalesce(excluded.accepted_per_pos[i], 0)
                       FROM generate_series(1, greatest(cardinality(b.accepted_per_pos),
                                                        cardinality(excluded.accepted_per_pos))) AS i ORDER BY i) END,
        generation_tokens = coalesce(b.generation_tokens, 0) + excluded.generation_tokens,
        finished_requests = coalesce(b.finished_requests, 0) + excluded.finished_requests,
        collected_at = excluded.collected_at
"""


def add_bucket_sums(session: Session, rows: Sequence[dict], *, now: datetime) -> int:
    """Add sums to the buckets of per-request pools (creating the rows and daily partitions they need):
    COPY into a staging table, then one INSERT ... ON CONFLICT DO UPDATE adding to what is there.
    Each row: pool_id, bucket_start, bucket_seconds, drafts, draft_tokens, accepted, per_pos,
    generation_tokens, finished_requests."""
    if not rows:
        return 0
    rollups.ensure_partitions(session, {_day(r["bucket_start"]) for r in rows})
    cursor = session.connection().connection.driver_connection.cursor()
    cursor.execute(_SUMS_STAGING)
    payload = "".join(
        f"{r['pool_id']}\t{r['bucket_start'].isoformat()}\t{r['bucket_seconds']}\t{r['drafts']}\t{r['draft_tokens']}\t"
        f"{r['accepted']}\t{{{','.join(map(str, r['per_pos']))}}}\t{r['generation_tokens']}\t{r['finished_requests']}\n"
        for r in rows)
    with cursor.copy(_SUMS_COPY) as copy:
        copy.write(payload)
    cursor.execute(_ADD_BUCKETS, {"now": now})
    return len(rows)


# --- reads ----------------------------------------------------------------------------------------------

_ALPHA = "(r.accepted::float8 / nullif(r.draft_tokens, 0))"


def _where(label_filter: dict[str, str] | None) -> tuple[str, dict]:
    where = "r.pool_id = ANY(:ids) AND r.finish_time > :lo AND r.finish_time <= :hi"
    params: dict = {}
    if label_filter:
        where += " AND r.labels @> CAST(:lf AS jsonb)"
        params["lf"] = json.dumps(label_filter)
    return where, params


@dataclass(frozen=True)
class AlphaStats:
    pool_id: int
    requests: int
    with_drafts: int
    steps: int
    draft_tokens: int
    accepted: int
    output_tokens: int
    request_mean: float | None
    below: int
    quantiles: list[float | None]


def alpha_stats(session: Session, *, pool_ids: Sequence[int], lo: datetime, hi: datetime, threshold: float,
                quantiles: Sequence[float], label_filter: dict[str, str] | None = None) -> list[AlphaStats]:
    """Per pool: counts, sums, the request-weighted mean α, requests below `threshold`, α quantiles
    (linear interpolation) over the requests that drafted."""
    where, params = _where(label_filter)
    sql = f"""
        SELECT r.pool_id, count(*), count(*) FILTER (WHERE r.draft_tokens > 0), sum(r.steps), sum(r.draft_tokens),
               sum(r.accepted), sum(r.output_tokens), avg({_ALPHA}),
               count(*) FILTER (WHERE r.draft_tokens > 0 AND r.accepted < :thr * r.draft_tokens),
               percentile_cont(CAST(:qs AS float8[])) WITHIN GROUP (ORDER BY {_ALPHA})
        FROM request_records r WHERE {where} GROUP BY r.pool_id"""
    rows = session.execute(text(sql), {"ids": list(pool_ids), "lo": lo, "hi": hi, "thr": threshold,
                                       "qs": list(quantiles), **params}).all()
    return [AlphaStats(pool_id=r[0], requests=r[1], with_drafts=r[2], steps=int(r[3] or 0),
                       draft_tokens=int(r[4] or 0), accepted=int(r[5] or 0), output_tokens=int(r[6] or 0),
                       request_mean=r[7], below=r[8], quantiles=list(r[9]) if r[9] else [None] * len(quantiles))
            for r in rows]


def alpha_histogram(session: Session, *, pool_ids: Sequence[int], lo: datetime, hi: datetime, bins: int,
                    label_filter: dict[str, str] | None = None) -> dict[int, list[int]]:
    """Per pool: requests per α bin (`bins` equal bins over [0, 1], 1.0 in the last)."""
    where, params = _where(label_filter)
    sql = f"""
        SELECT r.pool_id, least(floor({_ALPHA} * :bins)::int, :bins - 1) AS b, count(*)
        FROM request_records r WHERE {where} AND r.draft_tokens > 0 GROUP BY 1, 2"""
    out: dict[int, list[int]] = {}
    for pid, b, n in session.execute(text(sql), {"ids": list(pool_ids), "lo": lo, "hi": hi, "bins": bins,
                                                 **params}):
        out.setdefault(pid, [0] * bins)[b] += n
    return out


def alpha_by_length(session: Session, *, pool_ids: Sequence[int], lo: datetime, hi: datetime,
                    label_filter: dict[str, str] | None = None) -> list[tuple]:
    """Per pool and output-length band [2^b, 2^(b+1)): requests, draft tokens, accepted, mean α."""
    where, params = _where(label_filter)
    sql = f"""
        SELECT r.pool_id, floor(log(2, greatest(r.output_tokens, 1)))::int AS band, count(*),
               sum(r.draft_tokens), sum(r.accepted), avg({_ALPHA})
        FROM request_records r WHERE {where} GROUP BY 1, 2 ORDER BY 1, 2"""
    return [tuple(r) for r in session.execute(text(sql), {"ids": list(pool_ids), "lo": lo, "hi": hi, **params})]


def lowest(session: Session, *, pool_ids: Sequence[int], lo: datetime, hi: datetime, limit: int,
           min_draft_tokens: int, label_filter: dict[str, str] | None = None) -> list[tuple]:
    """The requests with the lowest α (ties: more draft tokens first): id, pool, labels, finish time, output
    tokens, steps, draft tokens, accepted, α."""
    where, params = _where(label_filter)
    sql = f"""
        SELECT r.request_id, r.pool_id, r.labels, r.finish_time, r.output_tokens, r.steps, r.draft_tokens,
               r.accepted, {_ALPHA} AS alpha
        FROM request_records r WHERE {where} AND r.draft_tokens >= greatest(:mind, 1)
        ORDER BY alpha, r.draft_tokens DESC, r.request_id LIMIT :lim"""
    return [tuple(r) for r in session.execute(text(sql), {"ids": list(pool_ids), "lo": lo, "hi": hi,
                                                           "mind": min_draft_tokens, "lim": limit, **params})]


def prune(session: Session, *, before: datetime) -> tuple[int, int]:
    """Delete request rows finished before `before` and label values unseen since; returns the counts."""
    rows = session.execute(text("DELETE FROM request_records WHERE finish_time < :t"), {"t": before}).rowcount
    values = session.execute(text("DELETE FROM request_label_values WHERE last_seen < :t"), {"t": before}).rowcount
    return rows or 0, values or 0
