"""spec_daily arrays: pool_spec_daily also packs the day's per-bucket spec-decode counters

Written by hand. A per-bucket read (a 1-minute chart of 30 days) took its whole hours from
`pool_spec_hourly`, 720 rows a pool. The rollup task writes an hour's rows for every pool at once, so a
pool's hours lie one to a heap page: the read visited ~600 pages a pool (24 ms for 10 pools x 30 days,
most of a 1-minute fleet chart's database time). A day row now also holds the day's per-bucket columns:
`bucket_seconds` (the one width of all its hour rows' packed columns; 0 when they differ or an hour has
none) and `drafts_at`, `draft_tokens_at`, `accepted_at`, the 24 hours' packed columns back to back (86400 /
bucket_seconds big-endian float64 slots; NaN where an hour has no row or no value; NULL when no hour of the
day has the counter, e.g. a baseline pool). STORAGE EXTERNAL: out of line and uncompressed, so a read
copies the bytes without decompressing them (counter values barely compress). Existing days are rebuilt
here from their hour rows (the rollup task's statement, backend.db.rollups._spec_days), in one statement:
it reads every hour row once (the peer bench's 14,400 hour rows: under a second; the time grows with the
hour rows kept), and the rollup task waits for it on the days it rewrites meanwhile. Until a day has its
columns (bucket_seconds 0, the default) reads take that day from its hours, so the answer never depends
on the migration having finished.
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

ARRAYS = ("drafts_at", "draft_tokens_at", "accepted_at")
NAN = "decode(repeat('7ff8000000000000', 3600 / nullif(t.w, 0)), 'hex')"


def upgrade() -> None:
    op.add_column("pool_spec_daily", sa.Column("bucket_seconds", sa.Integer(), nullable=False, server_default="0"))
    for c in ARRAYS:
        op.add_column("pool_spec_daily", sa.Column(c, sa.LargeBinary(), nullable=True))
        op.execute(f"ALTER TABLE pool_spec_daily ALTER COLUMN {c} SET STORAGE EXTERNAL")
    arrays = ", ".join(f"CASE WHEN t.w > 0 AND bool_or(h.{c} IS NOT NULL) "
                       f"THEN string_agg(coalesce(h.{c}, {NAN}), ''::bytea ORDER BY g.i) END AS {c}" for c in ARRAYS)
    op.execute(f"""
        UPDATE pool_spec_daily d SET bucket_seconds = x.w, drafts_at = x.drafts_at, draft_tokens_at = x.draft_tokens_at,
                                     accepted_at = x.accepted_at
        FROM (
            SELECT t.pool_id, t.day_start, t.w, {arrays}
            FROM (SELECT d.pool_id, d.day_start,
                         (SELECT CASE WHEN min(x.bucket_seconds) = max(x.bucket_seconds) AND min(x.bucket_seconds) > 0
                                 THEN min(x.bucket_seconds) ELSE 0 END
                          FROM pool_spec_hourly x WHERE x.pool_id = d.pool_id AND x.hour_start >= d.day_start
                            AND x.hour_start < d.day_start + interval '1 day') AS w
                  FROM pool_spec_daily d) AS t
            CROSS JOIN generate_series(0, 23) AS g(i)
            LEFT JOIN pool_spec_hourly h ON h.pool_id = t.pool_id AND h.hour_start = t.day_start + g.i * interval '1 hour'
            GROUP BY t.pool_id, t.day_start, t.w
        ) AS x
        WHERE d.pool_id = x.pool_id AND d.day_start = x.day_start
    """)


def downgrade() -> None:
    for c in reversed(ARRAYS):
        op.drop_column("pool_spec_daily", c)
    op.drop_column("pool_spec_daily", "bucket_seconds")
