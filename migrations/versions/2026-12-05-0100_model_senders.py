"""request_model_senders: which models each per-request sender posted, for the distinct-models cap

Written by hand. A sender is an ingest token (`token:<id>`) or a trusted proxy's user (`user:<name>`);
POST /api/v1/requests refuses a batch that would take one sender past `requests_max_models_per_sender`
distinct models within `requests_models_window_seconds`.
"""
import sqlalchemy as sa
from alembic import op

revision = "2026_12_05_model_senders"
down_revision = "2026_12_03_columnar_scrapes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "request_model_senders",
        sa.Column("sender", sa.String(length=220), primary_key=True),
        sa.Column("model_name", sa.String(length=300), primary_key=True),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("request_model_senders")
