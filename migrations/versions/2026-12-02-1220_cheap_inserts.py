"""request_records: cheaper inserts (BRIN on finish_time; pool deletes cascade by trigger, not FK)

Written by hand. Per-request ingest writes 20,000+ rows a second, so each row's fixed costs count:
- Only retention reads request_records by finish_time alone (every other read has the pool first:
  ix_request_records_pool_finish). Rows arrive in finish-time order, so a BRIN index serves the retention
  delete at a fraction of a b-tree's cost on every insert.
- The foreign key to pools ran a lookup (and a key-share lock on the pool row) per inserted row, a fifth of
  the insert's cost. Rows are written only by request_repo.insert_and_add with pool ids from the same
  transaction's pool upsert (which locks those pool rows); deleting pools still deletes their records,
  now from a statement trigger on pools.
"""
from alembic import op

revision = "2026_12_02_cheap_inserts"
down_revision = "2026_12_02_replicas"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_request_records_finish", table_name="request_records")
    op.create_index("ix_request_records_finish_brin", "request_records", ["finish_time"], postgresql_using="brin")
    op.drop_constraint("fk_request_records_pool_id_pools", "request_records", type_="foreignkey")
    op.execute("""
        CREATE FUNCTION pools_delete_request_records() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM request_records WHERE pool_id IN (SELECT id FROM gone);
            RETURN NULL;
        END $$""")
    op.execute("CREATE TRIGGER pools_delete_request_records AFTER DELETE ON pools REFERENCING OLD TABLE AS gone "
               "FOR EACH STATEMENT EXECUTE FUNCTION pools_delete_request_records()")


def downgrade() -> None:
    op.execute("DROP TRIGGER pools_delete_request_records ON pools")
    op.execute("DROP FUNCTION pools_delete_request_records()")
    op.execute("DELETE FROM request_records r WHERE NOT EXISTS (SELECT 1 FROM pools p WHERE p.id = r.pool_id)")
    op.create_foreign_key("fk_request_records_pool_id_pools", "request_records", "pools", ["pool_id"], ["id"],
                          ondelete="CASCADE")
    op.drop_index("ix_request_records_finish_brin", table_name="request_records")
    op.create_index("ix_request_records_finish", "request_records", ["finish_time"])
