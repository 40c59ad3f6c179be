"""replicas: per-replica coarse buckets (spec-decode counters, TPOT/ITL histograms)

Written by hand. `replicas` names each (instance, engine) of a pool; `replica_buckets` holds its sums per
coarse bucket (SPECWATCH_REPLICA_BUCKET_SECONDS), deleted after SPECWATCH_REPLICA_RETENTION_DAYS.
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "2026_12_02_replicas"
down_revision = "2026_12_02_data_version"
branch_labels = None
depends_on = None

FLOATS = postgresql.ARRAY(sa.Double(), dimensions=1)


def upgrade() -> None:
    op.create_table(
        "replicas",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("pool_id", sa.Integer(), sa.ForeignKey("pools.id", ondelete="CASCADE"), nullable=False),
        sa.Column("instance", sa.String(length=300), nullable=False),
        sa.Column("engine", sa.String(length=60), nullable=False),
        sa.Column("labels", postgresql.JSONB(), nullable=False, server_default="{}"),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("pool_id", "instance", "engine"),
    )
    op.create_table(
        "replica_buckets",
        sa.Column("replica_id", sa.Integer(), sa.ForeignKey("replicas.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("bucket_start", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("bucket_seconds", sa.Integer(), nullable=False),
        sa.Column("drafts", sa.Double()),
        sa.Column("draft_tokens", sa.Double()),
        sa.Column("accepted_tokens", sa.Double()),
        sa.Column("accepted_per_pos", FLOATS),
        sa.Column("tpot_layout_id", sa.Integer(), sa.ForeignKey("histogram_layouts.id")),
        sa.Column("tpot_buckets", FLOATS),
        sa.Column("tpot_sum", sa.Double()),
        sa.Column("tpot_count", sa.Double()),
        sa.Column("itl_layout_id", sa.Integer(), sa.ForeignKey("histogram_layouts.id")),
        sa.Column("itl_buckets", FLOATS),
        sa.Column("itl_sum", sa.Double()),
        sa.Column("itl_count", sa.Double()),
    )


def downgrade() -> None:
    op.drop_table("replica_buckets")
    op.drop_table("replicas")
