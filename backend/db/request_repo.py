"""SQL of per-request acceptance: record rows (bulk COPY, idempotent by request id) and the additive bucket
sums of exactly the rows stored, added to `pool_buckets` in the same statement; label values; the
distribution reads and retention. Nothing here commits."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import text
from sqlalchemy.orm import Session

from backend.db import rollups
from backend.domain import thresholds as thr

_STAGING = ("CREATE TEMP TABLE IF NOT EXISTS _request_records_in (request_id text, pool_id int, finish_us bigint, "
            "labels jsonb, output_tokens int, num_spec_tokens smallint, steps int, draft_tokens int, accepted int, "
            "histogram int[], replica text, prompt_tokens int, running_requests int, engine text) ON COMMIT DELETE "
            "ROWS; DELETE FROM _request_records_in")
COPY_COLUMNS = ("request_id", "pool_id", "finish_us", "labels", "output_tokens", "num_spec_tokens", "steps",
                "draft_tokens", "accepted", "histogram", "replica", "prompt_tokens", "running_requests", "engine")
_COPY = f"COPY _request_records_in ({', '.join(COPY_COLUMNS)}) FROM STDIN"
# One statement: the new request ids go in (sorted, so concurrent batches lock ids in one order), and only
# the rows that went in are summed per (pool, bucket) and added to pool_buckets. Bucket (start, start + w]
# holds a finish time; P_i (position i = 0 .. K-1) = sum of h_j for j > i: the suffix sums of the summed
# histogram from its second entry (ordinality 2) on, which also lines up histograms of different K. A pool's
# records come from one engine (claim_pool_engines), so a count its engine does not report (NULL) is NULL in
# every row of the pool and its sums stay NULL: never a partial sum (SGLang records with and without draft
# tokens are two kinds: one pool holds one).
_INSERT_AND_ADD = """
WITH ins AS (
    INSERT INTO request_records (request_id, pool_id, finish_time, labels, output_tokens, num_spec_tokens, steps,
                                 draft_tokens, accepted, histogram, received_at, replica, prompt_tokens,
                                 running_requests, engine)
    SELECT request_id, pool_id, timestamptz 'epoch' + finish_us * interval '1 microsecond', labels, output_tokens,
           num_spec_tokens, steps, draft_tokens, accepted, histogram, %(now)s, replica, prompt_tokens, running_requests,
           engine
    FROM _request_records_in ORDER BY request_id COLLATE "C"
    ON CONFLICT (request_id) DO NOTHING
    RETURNING pool_id, finish_time, output_tokens, steps, draft_tokens, accepted, histogram),
r AS (
    SELECT pool_id, date_bin(%(width)s, finish_time - interval '1 microsecond', timestamptz 'epoch') AS bucket_start,
           output_tokens, steps, draft_tokens, accepted, histogram FROM ins),
t AS (
    SELECT pool_id, bucket_start, sum(steps) AS drafts, sum(draft_tokens) AS draft_tokens, sum(accepted) AS accepted,
           sum(output_tokens) AS output_tokens, count(*) AS requests FROM r GROUP BY 1, 2),
h AS (
    SELECT r.pool_id, r.bucket_start, u.j, sum(u.n) AS n
    FROM r, unnest(r.histogram) WITH ORDINALITY AS u(n, j) GROUP BY 1, 2, 3),
p AS (
    SELECT pool_id, bucket_start, array_agg(suffix::float8 ORDER BY j) FILTER (WHERE j >= 2) AS per_pos
    FROM (SELECT pool_id, bucket_start, j, sum(n) OVER (PARTITION BY pool_id, bucket_start ORDER BY j DESC) AS suffix
          FROM h) AS s GROUP BY 1, 2),
up AS (
    INSERT INTO pool_buckets AS b (pool_id, bucket_start, bucket_seconds, drafts, draft_tokens, accepted_tokens,
                                   accepted_per_pos, generation_tokens, finished_requests, source, collected_at)
    SELECT t.pool_id, t.bucket_start, %(seconds)s, t.drafts, t.draft_tokens, t.accepted, p.per_pos, t.output_tokens,
           t.requests, 'requests', %(now)s
    FROM t LEFT JOIN p USING (pool_id, bucket_start) ORDER BY 1, 2  -- no histogram (llama.cpp, SGLang): no p row
    ON CONFLICT (pool_id, bucket_start) DO UPDATE SET
        drafts = coalesce(b.drafts, 0) + excluded.drafts,
        draft_tokens = coalesce(b.draft_tokens, 0) + excluded.draft_tokens,
        accepted_tokens = coalesce(b.accepted_tokens, 0) + excluded.accepted_tokens,
        accepted_per_pos = CASE WHEN b.accepted_per_pos IS NULL THEN excluded.accepted_per_pos
            ELSE ARRAY(SELECT coalesce(x, 0) + coalesce(y, 0)  -- unnest of two arrays pads the shorter with NULL
                       FROM unnest(b.accepted_per_pos, excluded.accepted_per_pos) AS u(x, y)) END,
        generation_tokens = coalesce(b.generation_tokens, 0) + excluded.generation_tokens,
        finished_requests = coalesce(b.finished_requests, 0) + excluded.finished_requests,
        collected_at = excluded.collected_at
    RETURNING pool_id)
SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM up), (SELECT count(DISTINCT pool_id) FROM up)
"""
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_SPECIAL = frozenset("\\\t\n\r")


def copy_text(value: str) -> str:
    """A value in COPY's text format (backslash, tab, newline and carriage return escaped)."""
    return value.translate(_ESCAPES) if not _SPECIAL.isdisjoint(value) else value


def insert_and_add(session: Session, payload: str, *, days: set, width: int, now: datetime) -> tuple[int, int, int]:
    """`payload`: COPY text rows in COPY_COLUMNS order (unique request ids; finish_us unix microseconds;
    histogram an int[] literal; pool ids of per-request pools). COPY them into a staging table, insert the
    ones whose request id is new and add exactly those to their buckets (creating the daily partitions of
    `days` first), all in one statement. Returns (records stored, buckets written, pools written): a retried
    batch stores none and adds nothing; a concurrent copy of it waits for the first and then adds nothing."""
    rollups.ensure_partitions(session, days)
    cursor = session.connection().connection.driver_connection.cursor()
    cursor.execute(_STAGING)
    with cursor.copy(_COPY) as copy:
        copy.write(payload)
    cursor.execute(_INSERT_AND_ADD, {"now": now, "width": timedelta(seconds=width), "seconds": width})
    stored, buckets, pools = cursor.fetchone()
    return stored, buckets, pools


_CLAIM_ENGINES = text("""
    WITH ins AS (
        INSERT INTO request_pool_engines (pool_id, engine, draft_tokens)
        SELECT p, e, d FROM unnest(CAST(:p AS int[]), CAST(:e AS varchar[]), CAST(:d AS boolean[])) AS t(p, e, d)
        ORDER BY p
        ON CONFLICT (pool_id) DO NOTHING RETURNING pool_id, engine, draft_tokens)
    SELECT pool_id, engine, draft_tokens FROM ins
    UNION ALL SELECT pool_id, engine, draft_tokens FROM request_pool_engines WHERE pool_id = ANY(CAST(:p AS int[]))
""")


def claim_pool_engines(session: Session, kinds: dict[int, tuple[str, bool]]) -> dict[int, tuple[str, bool]]:
    """Each records pool's kind of record, (engine, whether its records report draft tokens): the first records
    of a pool claim it; returns the kind stored per pool (the caller refuses records of another kind)."""
    if not kinds:
        return {}
    ids = sorted(kinds)
    params = {"p": ids, "e": [kinds[i][0] for i in ids], "d": [kinds[i][1] for i in ids]}
    out = {pid: (engine, drafted) for pid, engine, drafted in session.execute(_CLAIM_ENGINES, params)}
    missing = [i for i in ids if i not in out]
    if missing:  # claimed by a concurrent batch that committed after this statement's snapshot
        out.update({pid: (engine, drafted) for pid, engine, drafted in session.execute(text(
            "SELECT pool_id, engine, draft_tokens FROM request_pool_engines WHERE pool_id = ANY(:p)"),
            {"p": missing})})
    return out


def touch_known_labels(session: Session, pairs: set[tuple[str, str]], now: datetime,
                       since: datetime) -> set[tuple[str, str]]:
    """Mark the pairs among `pairs` seen at or after `since` seen now; returns them (the others are new to the
    window, whether never seen or last seen before it)."""
    rows = session.execute(text(
        "UPDATE request_label_values SET last_seen = greatest(last_seen, :now) WHERE (label, value) IN "
        "(SELECT * FROM unnest(CAST(:n AS varchar[]), CAST(:v AS varchar[]))) AND last_seen >= :since "
        "RETURNING label, value"),
        {"n": [n for n, _ in pairs], "v": [v for _, v in pairs], "now": now, "since": since}).all()
    return {(n, v) for n, v in rows}


def label_counts(session: Session, names: set[str], since: datetime) -> dict[str, int]:
    """Distinct values per label seen at or after `since`."""
    return dict(session.execute(text(
        "SELECT label, count(*) FROM request_label_values WHERE label = ANY(:n) AND last_seen >= :since "
        "GROUP BY label"), {"n": sorted(names), "since": since}).all())


def lock_labels(session: Session) -> None:
    """Serialise batches that add label values, so two of them cannot both pass the limit."""
    session.execute(text("SELECT pg_advisory_xact_lock(hashtext('specwatch.request_label_values'))"))


def add_label_values(session: Session, pairs: set[tuple[str, str]], now: datetime) -> None:
    session.execute(text(
        "INSERT INTO request_label_values (label, value, first_seen, last_seen) "
        "SELECT n, v, :now, :now FROM unnest(CAST(:n AS varchar[]), CAST(:v AS varchar[])) AS t(n, v) "
        "ON CONFLICT (label, value) DO UPDATE SET last_seen = greatest(request_label_values.last_seen, :now)"),
        {"n": [n for n, _ in pairs], "v": [v for _, v in pairs], "now": now})


def lock_senders(session: Session) -> None:
    """Serialise batches that may add models or pools, so two of them cannot both pass a limit."""
    session.execute(text("SELECT pg_advisory_xact_lock(hashtext('specwatch.request_model_senders'))"))


def sender_models(session: Session, sender: str, since: datetime) -> set[str]:
    """The models `sender` posted at or after `since` (older rows of that sender are deleted first)."""
    session.execute(text("DELETE FROM request_model_senders WHERE sender = :s AND last_seen < :since"),
                    {"s": sender, "since": since})
    return set(session.scalars(text("SELECT model_name FROM request_model_senders WHERE sender = :s"),
                               {"s": sender}))


def note_sender_models(session: Session, sender: str, models: set[str], now: datetime) -> None:
    session.execute(text(
        "INSERT INTO request_model_senders (sender, model_name, first_seen, last_seen) "
        "SELECT :s, m, :now, :now FROM unnest(CAST(:m AS varchar[])) AS t(m) "
        "ON CONFLICT (sender, model_name) DO UPDATE SET "
        "last_seen = greatest(request_model_senders.last_seen, :now)"),
        {"s": sender, "m": sorted(models), "now": now})


_UPSERT_POOLS = text("""
    INSERT INTO pools (model_name, traffic_class, spec_mode, first_seen, last_seen, num_spec_tokens, origin, engine)
    SELECT m, c, s, f, l, k, 'requests', e
    FROM unnest(CAST(:m AS varchar[]), CAST(:c AS varchar[]), CAST(:s AS varchar[]),
                CAST(:f AS timestamptz[]), CAST(:l AS timestamptz[]), CAST(:k AS smallint[]),
                CAST(:e AS varchar[])) AS t(m, c, s, f, l, k, e)
    ON CONFLICT (model_name, traffic_class, spec_mode, origin) DO UPDATE SET
        first_seen = least(pools.first_seen, excluded.first_seen),
        last_seen = greatest(pools.last_seen, excluded.last_seen),
        num_spec_tokens = coalesce(excluded.num_spec_tokens, pools.num_spec_tokens)
    RETURNING id, model_name, traffic_class, spec_mode, origin
""")


def engine_spec_modes(session: Session, models: Sequence[str], *, baseline_mode: str) -> dict[str, list[str]]:
    """model -> the spec modes (not the baseline) of its engine pools, sorted."""
    if not models:
        return {}
    rows = session.execute(text(
        "SELECT model_name, array_agg(DISTINCT spec_mode ORDER BY spec_mode) FROM pools WHERE origin = 'engine' "
        "AND spec_mode <> :base AND model_name = ANY(:m) GROUP BY model_name"),
        {"m": list(models), "base": baseline_mode}).all()
    return {m: list(modes) for m, modes in rows}


def upsert_request_pools(session: Session, seen: dict[tuple[str, str, str], tuple[datetime, datetime, int | None]],
                         engines: dict[tuple[str, str, str], str] | None = None
                         ) -> dict[tuple[str, str, str], tuple[int, str]]:
    """The records source of pools (origin `requests`), keyed (model, class, spec mode) -> (first start, last
    end, K), `engines` key -> the engine whose responses the records are (vllm where not given; a new pool
    takes it, an existing one keeps its own: claim_pool_engines refuses a batch of another engine); returns
    key -> (pool id, origin). An engine pool of the same key is a row of its own (origin
    `engine`): the two sources are never summed into one another (backend.domain.pool_rows)."""
    if not seen:
        return {}
    keys = sorted(seen)
    params = {"m": [k[0] for k in keys], "c": [k[1] for k in keys], "s": [k[2] for k in keys],
              "f": [seen[k][0] for k in keys], "l": [seen[k][1] for k in keys], "k": [seen[k][2] for k in keys],
              "e": [(engines or {}).get(k) or "vllm" for k in keys]}
    return {(m, c, s): (pid, origin) for pid, m, c, s, origin in session.execute(_UPSERT_POOLS, params)}


# --- reads ----------------------------------------------------------------------------------------------

_ALPHA = "(r.accepted::float8 / nullif(r.draft_tokens, 0))"


def _where(label_filter: dict[str, str] | None) -> tuple[str, dict]:
    where = "r.pool_id = ANY(:ids) AND r.finish_time > :lo AND r.finish_time <= :hi"
    params: dict = {}
    if label_filter:
        where += " AND r.labels @> CAST(:lf AS jsonb)"
        params["lf"] = json.dumps(label_filter)
    return where, params


def _int(value) -> int | None:
    """A sum as an int; None stays None (a count the pool's engine does not report)."""
    return None if value is None else int(value)


@dataclass(frozen=True)
class AlphaStats:
    pool_id: int
    requests: int
    with_drafts: int
    steps: int | None
    draft_tokens: int | None
    accepted: int
    output_tokens: int
    request_mean: float | None
    below: int
    quantiles: list[float | None]


def alpha_stats(session: Session, *, pool_ids: Sequence[int], lo: datetime, hi: datetime, threshold: float,
                quantiles: Sequence[float], label_filter: dict[str, str] | None = None) -> list[AlphaStats]:
    """Per pool: counts, sums, the request-weighted mean α, requests below `threshold`, α quantiles
    (linear interpolation) over the requests that drafted. "Below" is exact (thresholds.py): the threshold as
    the decimal it was configured as, p/q in lowest terms, and accepted * q < p * draft_tokens in numeric, so a
    request at exactly the threshold is not below it."""
    where, params = _where(label_filter)
    p, q = thr.as_pair(threshold)
    sql = f"""
        SELECT r.pool_id, count(*), count(*) FILTER (WHERE r.draft_tokens > 0), sum(r.steps), sum(r.draft_tokens),
               sum(r.accepted), sum(r.output_tokens), avg({_ALPHA}),
               count(*) FILTER (WHERE r.draft_tokens > 0
                                 AND r.accepted::numeric * :thr_q < :thr_p * r.draft_tokens::numeric),
               percentile_cont(CAST(:qs AS float8[])) WITHIN GROUP (ORDER BY {_ALPHA})
        FROM request_records r WHERE {where} GROUP BY r.pool_id"""
    rows = session.execute(text(sql), {"ids": list(pool_ids), "lo": lo, "hi": hi, "thr_p": p, "thr_q": q,
                                       "qs": list(quantiles), **params}).all()
    return [AlphaStats(pool_id=r[0], requests=r[1], with_drafts=r[2], steps=_int(r[3]),
                       draft_tokens=_int(r[4]), accepted=int(r[5] or 0), output_tokens=int(r[6] or 0),
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


CONTEXT_TOP_BAND = 17  # 2^17 = 131,072 tokens: the last band holds every longer context


def alpha_by_context(session: Session, *, pool_ids: Sequence[int], lo: datetime, hi: datetime,
                     label_filter: dict[str, str] | None = None) -> list[tuple]:
    """Per pool and context-length band [2^b, 2^(b+1)) (b = 0 .. CONTEXT_TOP_BAND, the last open-ended) of the
    requests that drafted and sent prompt_tokens: requests, Σd, Σa, Σa², Σd², Σa·d (the ratio estimator's
    variance), the mean and sample standard deviation of per-request α, and the drafts (Σ verify steps)."""
    where, params = _where(label_filter)
    sql = f"""
        SELECT r.pool_id, least(floor(log(2, greatest(r.prompt_tokens, 1)))::int, {CONTEXT_TOP_BAND}) AS band,
               count(*), sum(r.draft_tokens), sum(r.accepted), sum(r.accepted::float8 * r.accepted),
               sum(r.draft_tokens::float8 * r.draft_tokens), sum(r.accepted::float8 * r.draft_tokens),
               avg({_ALPHA}), stddev_samp({_ALPHA}), sum(r.steps)
        FROM request_records r WHERE {where} AND r.prompt_tokens IS NOT NULL AND r.draft_tokens > 0
        GROUP BY 1, 2 ORDER BY 1, 2"""
    return [tuple(r) for r in session.execute(text(sql), {"ids": list(pool_ids), "lo": lo, "hi": hi, **params})]


def lowest(session: Session, *, pool_ids: Sequence[int], lo: datetime, hi: datetime, limit: int,
           min_draft_tokens: int, label_filter: dict[str, str] | None = None) -> list[tuple]:
    """The requests with the lowest α (ties: more draft tokens first): id, pool, labels, finish time, output
    tokens, steps, draft tokens, accepted, α, replica."""
    where, params = _where(label_filter)
    sql = f"""
        SELECT r.request_id, r.pool_id, r.labels, r.finish_time, r.output_tokens, r.steps, r.draft_tokens,
               r.accepted, {_ALPHA} AS alpha, r.replica
        FROM request_records r WHERE {where} AND r.draft_tokens >= greatest(:mind, 1)
        ORDER BY alpha, r.draft_tokens DESC, r.request_id LIMIT :lim"""
    return [tuple(r) for r in session.execute(text(sql), {"ids": list(pool_ids), "lo": lo, "hi": hi,
                                                           "mind": min_draft_tokens, "lim": limit, **params})]


def prune(session: Session, *, before: datetime, values_before: datetime,
          senders_before: datetime) -> tuple[int, int, int]:
    """Delete request rows finished before `before`, label values unseen since `values_before`, and the
    (sender, model) rows unseen since `senders_before`; returns the three counts."""
    rows = session.execute(text("DELETE FROM request_records WHERE finish_time < :t"), {"t": before}).rowcount
    values = session.execute(text("DELETE FROM request_label_values WHERE last_seen < :t"),
                             {"t": values_before}).rowcount
    senders = session.execute(text("DELETE FROM request_model_senders WHERE last_seen < :t"),
                              {"t": senders_before}).rowcount
    return rows or 0, values or 0, senders or 0


def alpha_by_concurrency(session: Session, *, pool_ids: Sequence[int], lo: datetime, hi: datetime, width: int,
                         band_edges: Sequence[int], label_filter: dict[str, str] | None = None) -> list[tuple]:
    """Per records pool, bucket (start, width `width`, the bucket the record finished in), concurrency band and
    basis, over the requests that drafted: pool, bucket start, band index (None: no concurrency known), basis
    ('record': the record's running_requests; 'pool': the engine pool's running_mean in that bucket; None),
    requests, Σsteps, Σd, Σa, Σa², Σd², Σa·d, Σsteps², Σa·steps, Σα, Σα² (α per request).

    The engine pool of a record is the records pool's (model, class, spec mode) with origin 'engine'; when
    there is none at that bucket, the model's engine pools of that spec mode (a shared engine serving several
    classes): the mean of their running_mean. Band index: running <= band_edges[i] -> i, above every edge
    -> len(band_edges) (backend.domain.bands); NULL or <= 0 running -> NULL."""
    where, params = _where(label_filter)
    edges = {f"e{i}": e for i, e in enumerate(band_edges)}
    band = "CASE WHEN x.running IS NULL OR x.running <= 0 THEN NULL " + " ".join(
        f"WHEN x.running <= :e{i} THEN {i}" for i in range(len(band_edges))) + f" ELSE {len(band_edges)} END"
    sql = f"""
        WITH rec AS (
            SELECT r.pool_id, date_bin(:w, r.finish_time - interval '1 microsecond', timestamptz 'epoch') AS bucket,
                   r.running_requests, r.steps, r.draft_tokens, r.accepted
            FROM request_records r WHERE {where} AND r.draft_tokens > 0),
        need AS (SELECT DISTINCT pool_id, bucket FROM rec WHERE running_requests IS NULL),
        -- MATERIALIZED: inlined, the planner may join it to each record in a nested loop (minutes at 40,000
        -- records); computed once, it is one aggregate per (pool, bucket)
        eng AS MATERIALIZED (
            SELECT n.pool_id, n.bucket,
                   coalesce(avg(b.running_mean) FILTER (WHERE e.traffic_class = p.traffic_class),
                            avg(b.running_mean)) AS running
            FROM need n JOIN pools p ON p.id = n.pool_id
            JOIN pools e ON e.origin = 'engine' AND e.model_name = p.model_name AND e.spec_mode = p.spec_mode
            JOIN pool_buckets b ON b.pool_id = e.id AND b.bucket_start = n.bucket
            WHERE b.running_mean > 0 GROUP BY 1, 2),
        x AS (
            SELECT rec.*, coalesce(rec.running_requests::float8, eng.running) AS running,
                   CASE WHEN rec.running_requests IS NOT NULL THEN 'record'
                        WHEN eng.running IS NOT NULL THEN 'pool' END AS basis
            FROM rec LEFT JOIN eng USING (pool_id, bucket))
        SELECT x.pool_id, x.bucket, {band} AS band, x.basis, count(*), sum(x.steps), sum(x.draft_tokens),
               sum(x.accepted), sum(x.accepted::float8 * x.accepted), sum(x.draft_tokens::float8 * x.draft_tokens),
               sum(x.accepted::float8 * x.draft_tokens), sum(x.steps::float8 * x.steps),
               sum(x.accepted::float8 * x.steps), sum(x.accepted::float8 / x.draft_tokens),
               sum((x.accepted::float8 / x.draft_tokens) ^ 2)
        FROM x GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"""
    return [tuple(r) for r in session.execute(text(sql), {"ids": list(pool_ids), "lo": lo, "hi": hi,
                                                           "w": timedelta(seconds=width), **edges, **params})]
