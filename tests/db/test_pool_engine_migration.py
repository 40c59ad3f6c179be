"""The migration that adds pools.engine and the estimate columns, with data: every existing pool is vLLM's,
every existing bucket keeps its counts with NULL estimates; and back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from alembic import command
from sqlalchemy import text

from backend.db import rollups
from backend.db.session import make_engine, make_sessionmaker, session_scope
from tests.db.conftest import cfg_for

PREVIOUS = "2026_12_05_config_changes"
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_the_engine_migration_keeps_every_pool_as_vllm(empty_db: str) -> None:
    cfg = cfg_for(empty_db)
    command.upgrade(cfg, PREVIOUS)
    engine = make_engine(empty_db)
    try:
        with session_scope(make_sessionmaker(engine)) as s:
            rollups.ensure_partitions(s, {T0.date()})
            pid = s.execute(text(
                "INSERT INTO pools (model_name, traffic_class, spec_mode, first_seen, last_seen) "
                "VALUES ('m1', 'chat', 'eagle3', :f, :l) RETURNING id"), {"f": T0, "l": T0 + timedelta(minutes=1)}
            ).scalar()
            s.execute(text("INSERT INTO pool_buckets (pool_id, bucket_start, bucket_seconds, drafts, source, "
                           "collected_at) VALUES (:p, :b, 60, 10, 'scrape', :b)"), {"p": pid, "b": T0})
        command.upgrade(cfg, "head")
        with engine.connect() as conn:
            assert conn.execute(text("select model_name, engine from pools")).all() == [("m1", "vllm")]
            assert conn.execute(text("select drafts, est_weight_tokens, est_verify_steps, est_accepted_tokens, "
                                     "est_draft_tokens from pool_buckets")).all() == [(10.0, None, None, None, None)]
        command.downgrade(cfg, PREVIOUS)
        with engine.connect() as conn:
            cols = {r[0] for r in conn.execute(text(
                "select column_name from information_schema.columns where table_name in ('pools', 'pool_buckets')"))}
            assert "engine" not in cols and "est_weight_tokens" not in cols
            assert conn.execute(text("select drafts from pool_buckets")).scalar() == 10.0
    finally:
        engine.dispose()
