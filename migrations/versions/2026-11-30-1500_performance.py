"""performance: pool_buckets partitioned by day, hourly rollups, the dirty-hour queue and its triggers

Written by hand (autogenerate cannot express partitioning or triggers). The existing fact table is
converted in place: the partitioned table is created beside it, one daily partition per day that holds
rows (plus today and the next days), the rows are moved, the names swapped, the old table dropped.
The move fires the dirty-hour trigger, so the first rollup run rolls up all existing history.
"""
from datetime import UTC, date, datetime, timedelta

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

FAMILY_FKS = ("itl", "tpot", "ttft")


def _partitions(first: date, last: date) -> None:
    day = first
    while day <= last:
        nxt = day + timedelta(days=1)
        op.execute(f"CREATE TABLE IF NOT EXISTS pool_buckets_p{day:%Y%m%d} PARTITION OF pool_buckets "
                   f"FOR VALUES FROM ('{day.isoformat()} 00:00:00+00') TO ('{nxt.isoformat()} 00:00:00+00')")
        day = nxt


def upgrade() -> None:
    op.execute("ALTER TABLE pool_buckets RENAME TO pool_buckets_old")
    op.execute("ALTER TABLE pool_buckets_old RENAME CONSTRAINT pk_pool_buckets TO pk_pool_buckets_old")
    op.execute("ALTER INDEX ix_pool_buckets_bucket_start RENAME TO ix_pool_buckets_old_bucket_start")
    for name in ("pool_id_pools", *(f"{f}_layout_id_histogram_layouts" for f in FAMILY_FKS)):
        op.execute(f"ALTER TABLE pool_buckets_old RENAME CONSTRAINT fk_pool_buckets_{name} TO fk_pool_buckets_old_{name}")
    op.execute("CREATE TABLE pool_buckets (LIKE pool_buckets_old INCLUDING DEFAULTS) PARTITION BY RANGE (bucket_start)")
    op.execute("ALTER TABLE pool_buckets ADD CONSTRAINT pk_pool_buckets PRIMARY KEY (pool_id, bucket_start)")
    op.execute("ALTER TABLE pool_buckets ADD CONSTRAINT fk_pool_buckets_pool_id_pools FOREIGN KEY (pool_id) "
               "REFERENCES pools (id) ON DELETE CASCADE")
    for f in FAMILY_FKS:
        op.execute(f"ALTER TABLE pool_buckets ADD CONSTRAINT fk_pool_buckets_{f}_layout_id_histogram_layouts "
                   f"FOREIGN KEY ({f}_layout_id) REFERENCES histogram_layouts (id)")
    op.execute("CREATE INDEX ix_pool_buckets_bucket_start ON pool_buckets (bucket_start)")

    op.create_table(
        "pool_buckets_hourly",
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("hour_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("band", sa.SmallInteger(), nullable=False),
        sa.Column("itl_layout_id", sa.Integer(), nullable=False),
        sa.Column("tpot_layout_id", sa.Integer(), nullable=False),
        sa.Column("ttft_layout_id", sa.Integer(), nullable=False),
        sa.Column("buckets", sa.Integer(), nullable=False),
        *(sa.Column(c, sa.Double(), nullable=True) for c in ("drafts", "draft_tokens", "accepted_tokens", "drafts_pp")),
        sa.Column("accepted_per_pos", postgresql.ARRAY(sa.Double(), dimensions=1), nullable=True),
        sa.Column("pp_len", sa.SmallInteger(), nullable=True),
        *(c for f in FAMILY_FKS for c in (
            sa.Column(f"{f}_buckets", postgresql.ARRAY(sa.Double(), dimensions=1), nullable=True),
            sa.Column(f"{f}_sum", sa.Double(), nullable=True), sa.Column(f"{f}_count", sa.Double(), nullable=True))),
        *(sa.Column(c, sa.Double(), nullable=True)
          for c in ("generation_tokens", "prompt_tokens", "finished_requests", "preemptions", "running_sum")),
        sa.Column("running_n", sa.Integer(), nullable=False),
        sa.Column("restarts", sa.Integer(), nullable=True),
        sa.Column("last_end", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["pool_id"], ["pools.id"], name=op.f("fk_pool_buckets_hourly_pool_id_pools"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("pool_id", "hour_start", "band", "itl_layout_id", "tpot_layout_id", "ttft_layout_id",
                                name=op.f("pk_pool_buckets_hourly")),
    )
    op.create_index("ix_pool_buckets_hourly_hour_start", "pool_buckets_hourly", ["hour_start"], unique=False)
    op.create_table(
        "rollup_dirty",
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("hour_start", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("pool_id", "hour_start", name=op.f("pk_rollup_dirty")),
    )
    op.execute("""
        CREATE FUNCTION pool_buckets_mark_dirty() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO rollup_dirty (pool_id, hour_start)
            SELECT DISTINCT pool_id,
                   to_timestamp(floor((extract(epoch FROM bucket_start) + bucket_seconds - 1) / 3600) * 3600)
            FROM changed
            ON CONFLICT DO NOTHING;
            RETURN NULL;
        END $$""")
    for event, ref in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
        op.execute(f"CREATE TRIGGER pool_buckets_dirty_{event.lower()} AFTER {event} ON pool_buckets "
                   f"REFERENCING {ref} TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION pool_buckets_mark_dirty()")

    bind = op.get_bind()
    lo, hi = bind.execute(sa.text("SELECT min(bucket_start), max(bucket_start) FROM pool_buckets_old")).one()
    today = datetime.now(UTC).date()
    first = min(lo.astimezone(UTC).date(), today) if lo else today
    last = max(hi.astimezone(UTC).date(), today) if hi else today
    _partitions(first, last + timedelta(days=7))
    op.execute("INSERT INTO pool_buckets SELECT * FROM pool_buckets_old")
    op.execute("DROP TABLE pool_buckets_old")


def downgrade() -> None:
    op.drop_table("rollup_dirty")
    op.drop_index("ix_pool_buckets_hourly_hour_start", table_name="pool_buckets_hourly")
    op.drop_table("pool_buckets_hourly")
    op.execute("ALTER TABLE pool_buckets RENAME TO pool_buckets_part")
    op.execute("ALTER TABLE pool_buckets_part RENAME CONSTRAINT pk_pool_buckets TO pk_pool_buckets_part")
    op.execute("ALTER INDEX ix_pool_buckets_bucket_start RENAME TO ix_pool_buckets_part_bucket_start")
    for name in ("pool_id_pools", *(f"{f}_layout_id_histogram_layouts" for f in FAMILY_FKS)):
        op.execute(f"ALTER TABLE pool_buckets_part RENAME CONSTRAINT fk_pool_buckets_{name} "
                   f"TO fk_pool_buckets_part_{name}")
    op.execute("CREATE TABLE pool_buckets (LIKE pool_buckets_part INCLUDING DEFAULTS)")
    op.execute("ALTER TABLE pool_buckets ADD CONSTRAINT pk_pool_buckets PRIMARY KEY (pool_id, bucket_start)")
    op.execute("ALTER TABLE pool_buckets ADD CONSTRAINT fk_pool_buckets_pool_id_pools FOREIGN KEY (pool_id) "
               "REFERENCES pools (id) ON DELETE CASCADE")
    for f in FAMILY_FKS:
        op.execute(f"ALTER TABLE pool_buckets ADD CONSTRAINT fk_pool_buckets_{f}_layout_id_histogram_layouts "
                   f"FOREIGN KEY ({f}_layout_id) REFERENCES histogram_layouts (id)")
    op.execute("CREATE INDEX ix_pool_buckets_bucket_start ON pool_buckets (bucket_start)")
    op.execute("INSERT INTO pool_buckets SELECT * FROM pool_buckets_part")
    op.execute("DROP TABLE pool_buckets_part CASCADE")
    op.execute("DROP FUNCTION pool_buckets_mark_dirty()")
