"""per-request acceptance: request_records, request_label_values, pools.origin

Written by hand. `pools.origin` marks where a pool's buckets come from: `engine` (vLLM counters, every
existing pool) or `requests` (sums of per-request records posted to POST /api/v1/requests).
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "2026_12_02_per_request"
down_revision = "2026_12_02_token_expiry"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pools", sa.Column("origin", sa.String(length=16), nullable=False, server_default="engine"))
    op.create_table(
        "request_records",
        sa.Column("request_id", sa.String(length=200), primary_key=True),
        sa.Column("pool_id", sa.Integer(), sa.ForeignKey("pools.id", ondelete="CASCADE"), nullable=False),
        sa.Column("finish_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("labels", postgresql.JSONB(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("num_spec_tokens", sa.SmallInteger(), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("draft_tokens", sa.Integer(), nullable=False),
        sa.Column("accepted", sa.Integer(), nullable=False),
        sa.Column("histogram", postgresql.ARRAY(sa.Integer(), dimensions=1), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_request_records_pool_finish", "request_records", ["pool_id", "finish_time"])
    op.create_index("ix_request_records_finish", "request_records", ["finish_time"])
    op.create_table(
        "request_label_values",
        sa.Column("label", sa.String(length=60), primary_key=True),
        sa.Column("value", sa.String(length=200), primary_key=True),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("request_label_values")
    op.drop_index("ix_request_records_finish", table_name="request_records")
    op.drop_index("ix_request_records_pool_finish", table_name="request_records")
    op.drop_table("request_records")
    op.drop_column("pools", "origin")
