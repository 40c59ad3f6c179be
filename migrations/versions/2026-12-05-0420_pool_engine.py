"""pools.engine (vllm | llamacpp | sglang) and the estimated spec-decode parts of pool_buckets

Written by hand. Every pool so far came from vLLM: existing rows take 'vllm' (the column's default). The
four `est_*` columns of pool_buckets hold the additive parts of SGLang's gauge-based estimate
(backend.domain.engines.estimate); they are NULL for every existing row and for every exact source.
"""
import sqlalchemy as sa
from alembic import op

revision = "2026_12_05_pool_engine"
down_revision = "2026_12_05_config_changes"
branch_labels = None
depends_on = None

EST = ("est_weight_tokens", "est_verify_steps", "est_accepted_tokens", "est_draft_tokens")


def upgrade() -> None:
    op.add_column("pools", sa.Column("engine", sa.String(16), nullable=False, server_default="vllm"))
    for name in EST:
        op.add_column("pool_buckets", sa.Column(name, sa.Double(), nullable=True))


def downgrade() -> None:
    for name in reversed(EST):
        op.drop_column("pool_buckets", name)
    op.drop_column("pools", "engine")
