"""request_records.running_requests: the engine's running requests when the request finished

Written by hand. A per-request record may carry the serving engine's vllm:num_requests_running at its
finish (`running_requests`, NULL when the caller does not know it): α by concurrency band reads it, and
falls back to the engine pool's mean running requests of the record's bucket. Nothing is moved.
"""
import sqlalchemy as sa
from alembic import op

revision = "2026_12_05_record_running"
down_revision = "2026_12_05_records_source"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("request_records", sa.Column("running_requests", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("request_records", "running_requests")
