"""spec_daily: per pool and UTC day, the day's 24 hour totals of the spec-decode counters, packed

Written by hand. A read that sums whole hours (a step or rolling window of whole hours: a 7-day rolling
acceptance at 1 h step, a 90-day chart) took one `pool_spec_hourly` index entry per pool and hour, 720 a
pool for 30 days. `pool_spec_daily` holds, per pool and day, the same hour totals as three packed
big-endian float64 byte strings of 24 slots (slot j: the hour starting at day_start + j h; NaN where the
hour has no row or no value), so such a read takes 30 rows a pool. The rollup task rewrites a day's row
whenever it rewrites one of its hours, in the same transaction; reads take a day's row only when none of
its hours is dirty (backend.db.spec_series). Existing history: built here from pool_spec_hourly.
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pool_spec_daily",
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("day_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("drafts_h", sa.LargeBinary(), nullable=False),
        sa.Column("draft_tokens_h", sa.LargeBinary(), nullable=False),
        sa.Column("accepted_h", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["pool_id"], ["pools.id"], name=op.f("fk_pool_spec_daily_pool_id_pools"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("pool_id", "day_start", name=op.f("pk_pool_spec_daily")),
    )
    op.create_index("ix_pool_spec_daily_day_start", "pool_spec_daily", ["day_start"])
    # every day that has hours (the rollup task's statement, backend.db.rollups._spec_days, over all days)
    op.execute("""
        INSERT INTO pool_spec_daily (pool_id, day_start, drafts_h, draft_tokens_h, accepted_h)
        SELECT t.pool_id, t.day_start,
               string_agg(float8send(coalesce(h.drafts, 'NaN')), ''::bytea ORDER BY g.i),
               string_agg(float8send(coalesce(h.draft_tokens, 'NaN')), ''::bytea ORDER BY g.i),
               string_agg(float8send(coalesce(h.accepted_tokens, 'NaN')), ''::bytea ORDER BY g.i)
        FROM (SELECT DISTINCT pool_id, to_timestamp(floor(extract(epoch FROM hour_start) / 86400) * 86400) AS day_start
              FROM pool_spec_hourly) AS t
        CROSS JOIN generate_series(0, 23) AS g(i)
        LEFT JOIN pool_spec_hourly h ON h.pool_id = t.pool_id AND h.hour_start = t.day_start + g.i * interval '1 hour'
        GROUP BY t.pool_id, t.day_start
    """)


def downgrade() -> None:
    op.drop_index("ix_pool_spec_daily_day_start", table_name="pool_spec_daily")
    op.drop_table("pool_spec_daily")
