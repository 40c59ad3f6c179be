"""spec_hourly: per pool and hour, the spec-decode counters' hour totals and per-bucket columns

Written by hand. `pool_spec_hourly` is what acceptance series read: one row per pool and hour with the
hour's summed drafts / draft tokens / accepted tokens (any step that is a whole number of hours sums
these) and the same three counters per bucket as packed big-endian float64 (bytea of 8 bytes per slot,
`float8send`; slot j = the bucket ending at hour_start + (j + 1) * bucket_seconds; NaN where no bucket
or no value), so a 1-minute series over 30 days reads 720 rows per pool instead of 43,200 and decodes
with one numpy call. The rollup task maintains it with pool_buckets_hourly
from the same dirty-hour queue. Existing history: the hour totals are copied from pool_buckets_hourly
(bucket_seconds 0: no per-bucket columns), and every hour whose raw buckets still exist is queued so
the next rollup run fills its per-bucket columns.
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pool_spec_hourly",
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("hour_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("bucket_seconds", sa.Integer(), nullable=False),
        sa.Column("drafts", sa.Double(), nullable=True),
        sa.Column("draft_tokens", sa.Double(), nullable=True),
        sa.Column("accepted_tokens", sa.Double(), nullable=True),
        sa.Column("drafts_at", sa.LargeBinary(), nullable=True),
        sa.Column("draft_tokens_at", sa.LargeBinary(), nullable=True),
        sa.Column("accepted_at", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(["pool_id"], ["pools.id"], name=op.f("fk_pool_spec_hourly_pool_id_pools"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("pool_id", "hour_start", name=op.f("pk_pool_spec_hourly")),
    )
    op.create_index("ix_pool_spec_hourly_hour_start", "pool_spec_hourly", ["hour_start"])
    # hour-total reads (steps of whole hours) become index-only scans instead of reading the wide rows
    op.create_index("ix_pool_spec_hourly_totals", "pool_spec_hourly", ["pool_id", "hour_start"],
                    postgresql_include=["drafts", "draft_tokens", "accepted_tokens"])
    # keep the visibility map current on this insert/delete-heavy table, so those scans stay index-only
    op.execute("ALTER TABLE pool_spec_hourly SET (autovacuum_vacuum_insert_scale_factor = 0.02, "
               "autovacuum_vacuum_scale_factor = 0.02)")
    op.execute("""
        INSERT INTO pool_spec_hourly (pool_id, hour_start, bucket_seconds, drafts, draft_tokens, accepted_tokens)
        SELECT pool_id, hour_start, 0, sum(drafts), sum(draft_tokens), sum(accepted_tokens)
        FROM pool_buckets_hourly GROUP BY pool_id, hour_start
    """)
    op.execute("""
        INSERT INTO rollup_dirty (pool_id, hour_start)
        SELECT DISTINCT pool_id, to_timestamp(floor((extract(epoch FROM bucket_start) + bucket_seconds - 1) / 3600) * 3600)
        FROM pool_buckets
        ON CONFLICT DO NOTHING
    """)


def downgrade() -> None:
    op.drop_index("ix_pool_spec_hourly_totals", table_name="pool_spec_hourly")
    op.drop_index("ix_pool_spec_hourly_hour_start", table_name="pool_spec_hourly")
    op.drop_table("pool_spec_hourly")
