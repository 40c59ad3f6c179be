"""spec_raw_hours(): the raw buckets of the hours a series read cannot take from the rollups, packed

Written by hand. A series read over whole hours takes from `pool_buckets` only the hours the rollups do not
answer: dirty ones (written since the rollup task last ran) and, for per-bucket reads, hours whose packed
columns have another bucket width. That part of the statement named the partitioned table, so every
execution of its generic plan locked and started up a scan of every partition in the range (37 for a
30-day read with a 7-day window) even when no hour qualified, which is the usual case for a past range.
This function runs that part only when some hour qualifies, and then only over the partitions between the
first and the last such hour. STABLE: it reads with the calling statement's snapshot, so the read stays one
snapshot (backend.db.routing). It returns the three counters packed as backend.db.spec_series packs raw
buckets: per pool, the bucket ends (int8send) and each counter (float8send, NaN where not reported), in one
and the same row order.
"""
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

FUNCTION = r"""
CREATE FUNCTION spec_raw_hours(ids integer[], h1 timestamptz, h2 timestamptz, w integer, per_bucket boolean)
RETURNS TABLE (pool_id integer, e_at bytea, drafts bytea, draft_tokens bytea, accepted_tokens bytea)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    t_pools integer[];
    t_hours timestamptz[];
    lo timestamptz;
    hi timestamptz;
BEGIN
    -- the hours to take from raw buckets, once: their pools and starts, and the first and last
    SELECT array_agg(x.pool_id), array_agg(x.hour_start), min(x.hour_start), max(x.hour_start)
    INTO t_pools, t_hours, lo, hi
    FROM (SELECT d.pool_id, d.hour_start FROM rollup_dirty d
          WHERE d.pool_id = ANY(ids) AND d.hour_start >= h1 AND d.hour_start < h2
          UNION
          SELECT h.pool_id, h.hour_start FROM pool_spec_hourly h
          WHERE per_bucket AND h.pool_id = ANY(ids) AND h.hour_start >= h1 AND h.hour_start < h2
            AND h.bucket_seconds <> w) x;
    IF lo IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT b.pool_id,
           string_agg(int8send(extract(epoch FROM b.bucket_start)::bigint + b.bucket_seconds), ''::bytea),
           string_agg(coalesce(float8send(b.drafts), '\x7ff8000000000000'::bytea), ''::bytea),
           string_agg(coalesce(float8send(b.draft_tokens), '\x7ff8000000000000'::bytea), ''::bytea),
           string_agg(coalesce(float8send(b.accepted_tokens), '\x7ff8000000000000'::bytea), ''::bytea)
    FROM pool_buckets b
    JOIN unnest(t_pools, t_hours) AS x(pool_id, hour_start)
      ON b.pool_id = x.pool_id AND b.bucket_start > x.hour_start - make_interval(secs => w)
     AND b.bucket_start <= x.hour_start + interval '1 hour' - make_interval(secs => w)
    WHERE b.bucket_start > lo - make_interval(secs => w)
      AND b.bucket_start <= hi + interval '1 hour' - make_interval(secs => w)
    GROUP BY b.pool_id;
END
$$
"""


def upgrade() -> None:
    op.execute(FUNCTION)


def downgrade() -> None:
    op.execute("DROP FUNCTION spec_raw_hours(integer[], timestamptz, timestamptz, integer, boolean)")
