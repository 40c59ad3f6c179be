"""api_tokens.expires_at: a token may expire (NULL: never)

Written by hand. An expired token is refused (401) like a revoked one; existing tokens never expire.
"""
import sqlalchemy as sa
from alembic import op

revision = "2026_12_02_token_expiry"
down_revision = "2026_12_02_outbox_doubt"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_tokens", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("api_tokens", "expires_at")
