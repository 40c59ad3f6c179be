"""spec_hourly covering index also carries bucket_seconds

Per-bucket series reads look up the hours whose packed columns are not of the caller's bucket width
(`bucket_seconds <> w`, read from raw buckets instead). Without the width in an index that lookup read
every wide row of the range from the heap (a sequential scan of the table on a long range); with it, it
is an index-only scan of the same index the hour-total reads use.
"""
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_pool_spec_hourly_totals", table_name="pool_spec_hourly")
    op.create_index("ix_pool_spec_hourly_totals", "pool_spec_hourly", ["pool_id", "hour_start"],
                    postgresql_include=["drafts", "draft_tokens", "accepted_tokens", "bucket_seconds"])


def downgrade() -> None:
    op.drop_index("ix_pool_spec_hourly_totals", table_name="pool_spec_hourly")
    op.create_index("ix_pool_spec_hourly_totals", "pool_spec_hourly", ["pool_id", "hour_start"],
                    postgresql_include=["drafts", "draft_tokens", "accepted_tokens"])
