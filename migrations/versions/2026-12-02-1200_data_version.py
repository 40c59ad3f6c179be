"""data version: a sequence every write to the tables the API's answers are read from advances

Written by hand. A statement-level trigger on each table /summary and /fleet read (pools, buckets, their
rollups, histogram layouts, fleet snapshots) takes a shared transaction-level advisory lock and advances
the sequence `specwatch_data_version`. The API's response cache (backend.api.cache) keys its answers by
the sequence's value, so the next request after a write computes afresh; the lock tells a reader that a
write is still in flight (its bump seen, its rows not yet), when an answer must not be stored
(backend.db.data_version).
"""
from alembic import op

revision = "2026_12_02_data_version"
down_revision = "2026_12_02_per_request"
branch_labels = None
depends_on = None

TABLES = ("pools", "pool_buckets", "pool_buckets_hourly", "pool_spec_hourly", "pool_spec_daily", "rollup_dirty",
          "histogram_layouts", "fleet_snapshots")
LOCK_KEY = 726_001_026  # backend.db.data_version.LOCK_KEY


def upgrade() -> None:
    op.execute("CREATE SEQUENCE specwatch_data_version")
    op.execute(f"""
        CREATE FUNCTION specwatch_data_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock_shared({LOCK_KEY});
            PERFORM nextval('specwatch_data_version');
            RETURN NULL;
        END $$""")
    for table in TABLES:
        op.execute(f"CREATE TRIGGER {table}_data_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
                   "FOR EACH STATEMENT EXECUTE FUNCTION specwatch_data_changed()")


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"DROP TRIGGER {table}_data_version ON {table}")
    op.execute("DROP FUNCTION specwatch_data_changed()")
    op.execute("DROP SEQUENCE specwatch_data_version")
