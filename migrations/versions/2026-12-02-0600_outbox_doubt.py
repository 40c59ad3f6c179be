"""notify_outbox.resent_after_doubt: sends of a message after its delivery was in doubt

A Slack POST that timed out after the request went out (or whose sender died mid-delivery) may have
landed: re-sending it (on_doubt: resend) may make a duplicate. Each such send is counted per message so
the channel status can show the possible duplicates.
"""
import sqlalchemy as sa
from alembic import op

revision = "2026_12_02_outbox_doubt"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("notify_outbox", sa.Column("resent_after_doubt", sa.Integer(), nullable=False,
                                             server_default="0"))


def downgrade() -> None:
    op.drop_column("notify_outbox", "resent_after_doubt")
