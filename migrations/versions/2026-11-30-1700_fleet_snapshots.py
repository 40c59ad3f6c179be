"""fleet_snapshots: the fleet overview precomputed per standard window

One row per window length (seconds): the /fleet JSON body for the window ending at generated_at. The
snapshot task rewrites them every SPECWATCH_FLEET_SNAPSHOT_INTERVAL_SECONDS; the API serves one only
while it is younger than SPECWATCH_FLEET_SNAPSHOT_MAX_AGE_SECONDS, else computes the answer live.
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fleet_snapshots",
        sa.Column("window_seconds", sa.Integer(), nullable=False),
        sa.Column("generated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("window_seconds", name=op.f("pk_fleet_snapshots")),
    )


def downgrade() -> None:
    op.drop_table("fleet_snapshots")
