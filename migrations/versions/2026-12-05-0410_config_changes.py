"""config_changes: each change of a pool's drafter, K or vLLM version, and when it took effect

Written by hand. The pool row keeps only the current drafter / K / vLLM version; this table keeps the
history, written by collection when a pool's K changes and by operators' annotations, so that a comparison
can split a pool's data before and after a change. New table only: no data moves.
"""
import sqlalchemy as sa
from alembic import op

revision = "2026_12_05_config_changes"
down_revision = "2026_12_05_record_running"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "config_changes",
        sa.Column("id", sa.BigInteger(), primary_key=True),
        sa.Column("pool_id", sa.Integer(), sa.ForeignKey("pools.id", ondelete="CASCADE"), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("field", sa.String(20), nullable=False),
        sa.Column("old_value", sa.String(300)),
        sa.Column("new_value", sa.String(300)),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("note", sa.String(500)),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("by", sa.String(120)),
        sa.UniqueConstraint("pool_id", "at", "field", name="uq_config_changes_pool_id_at_field"),
    )
    op.create_index("ix_config_changes_at", "config_changes", ["at"])


def downgrade() -> None:
    op.drop_index("ix_config_changes_at", table_name="config_changes")
    op.drop_table("config_changes")
