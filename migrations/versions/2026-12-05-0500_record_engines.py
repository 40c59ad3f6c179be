"""per-request records of llama.cpp and SGLang: request_records.engine, NULL counts where an engine reports
none, request_pool_engines

Written by hand. A record says whose counts it carries (`engine`: vllm, llamacpp or sglang; every existing row
is vLLM's). llama.cpp reports no drafts, K or histogram per response, older SGLang servers no draft tokens, so
num_spec_tokens, steps, draft_tokens and histogram take NULL (never 0) where the engine does not report them.
`request_pool_engines` keeps the one kind of record each records pool holds (its engine, and whether they
report draft tokens, which SGLang's may not): the existing records pools are vLLM's. The downgrade deletes the records that are not vLLM's (the old columns
cannot hold their NULL counts) and subtracts nothing from the buckets: those pools keep their sums.
"""
import sqlalchemy as sa
from alembic import op

revision = "2026_12_05_record_engines"
down_revision = "2026_12_05_pool_engine"
branch_labels = None
depends_on = None

CHECK = "engine IN ('vllm', 'llamacpp', 'sglang')"
NULLABLE = (("num_spec_tokens", sa.SmallInteger()), ("steps", sa.Integer()), ("draft_tokens", sa.Integer()),
            ("histogram", sa.dialects.postgresql.ARRAY(sa.Integer(), dimensions=1)))


def upgrade() -> None:
    op.add_column("request_records", sa.Column("engine", sa.String(length=16), nullable=False,
                                               server_default=sa.text("'vllm'")))
    op.create_check_constraint("ck_request_records_engine", "request_records", CHECK)
    for name, kind in NULLABLE:
        op.alter_column("request_records", name, existing_type=kind, nullable=True)
    op.create_table(
        "request_pool_engines",
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("engine", sa.String(length=16), nullable=False),
        sa.Column("draft_tokens", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("pool_id", name="pk_request_pool_engines"),
        sa.CheckConstraint(CHECK, name="ck_request_pool_engines_engine"),
    )
    op.execute("INSERT INTO request_pool_engines (pool_id, engine, draft_tokens) "
               "SELECT id, 'vllm', true FROM pools WHERE origin = 'requests' ORDER BY id")


def downgrade() -> None:
    op.execute("DELETE FROM request_records WHERE engine <> 'vllm'")
    op.drop_table("request_pool_engines")
    for name, kind in NULLABLE:
        op.alter_column("request_records", name, existing_type=kind, nullable=False)
    op.drop_constraint("ck_request_records_engine", "request_records", type_="check")
    op.drop_column("request_records", "engine")
