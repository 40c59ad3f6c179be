"""The migration that lets records of llama.cpp and SGLang in, from the schema before it, with data: every
existing record is vLLM's and keeps its counts, every existing records pool is claimed for vLLM (with draft
tokens), the counts an engine does not report can be NULL; and back (the records that are not vLLM's go)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
from alembic import command
from sqlalchemy import text

from tests.db.conftest import cfg_for, rows, seeding
from tests.support.db import libpq

PREVIOUS = "2026_12_05_pool_engine"
HEAD = "2026_12_05_record_engines"
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _seed(url: str) -> dict[str, int]:
    with seeding(url, T0.date()) as s:
        ids = {}
        for m, c, origin in (("m1", "chat", "requests"), ("m1", "default", "engine"), ("m2", "code", "requests")):
            ids[f"{m}/{c}"] = s.execute(text(
                "INSERT INTO pools (model_name, traffic_class, spec_mode, num_spec_tokens, first_seen, last_seen, "
                "origin) VALUES (:m, :c, 'eagle3', 3, :f, :f, :o) RETURNING id"),
                {"m": m, "c": c, "f": T0, "o": origin}).scalar()
        for n, key in enumerate(("m1/chat", "m1/chat", "m2/code")):
            s.execute(text(
                "INSERT INTO request_records (request_id, pool_id, finish_time, labels, output_tokens, "
                "num_spec_tokens, steps, draft_tokens, accepted, histogram, received_at) "
                "VALUES (:r, :p, :t, CAST(:l AS jsonb), 50, 3, 2, 6, :a, '{0,1,0,1}', :t)"),
                {"r": f"req-{n}", "p": ids[key], "t": T0 + timedelta(seconds=30), "a": 4,
                 "l": json.dumps({"traffic_class": key.split("/")[1]})})
    return ids


def test_existing_records_are_vllms_and_new_ones_may_leave_counts_null(empty_db: str) -> None:
    cfg = cfg_for(empty_db)
    command.upgrade(cfg, PREVIOUS)
    ids = _seed(empty_db)
    before = rows(empty_db, "SELECT request_id, pool_id, num_spec_tokens, steps, draft_tokens, accepted, histogram "
                            "FROM request_records ORDER BY 1")

    command.upgrade(cfg, HEAD)
    after = rows(empty_db, "SELECT request_id, pool_id, num_spec_tokens, steps, draft_tokens, accepted, histogram, "
                           "engine FROM request_records ORDER BY 1")
    assert after == [(*row, "vllm") for row in before]
    # the records pools (not the engine pool) are vLLM's, with draft tokens
    assert rows(empty_db, "SELECT pool_id, engine, draft_tokens FROM request_pool_engines ORDER BY 1") == [
        (ids["m1/chat"], "vllm", True), (ids["m2/code"], "vllm", True)]
    # a llama.cpp record: no K, drafts or histogram
    with psycopg.connect(libpq(empty_db)) as conn:
        conn.execute("INSERT INTO request_records (request_id, pool_id, finish_time, labels, output_tokens, accepted, "
                     "draft_tokens, received_at, engine) VALUES ('lc-1', %s, %s, '{}', 10, 3, 4, %s, 'llamacpp')",
                     (ids["m2/code"], T0, T0))
        conn.commit()
        try:
            conn.execute("INSERT INTO request_records (request_id, pool_id, finish_time, labels, output_tokens, "
                         "accepted, received_at, engine) VALUES ('x', 1, %s, '{}', 1, 0, %s, 'tgi')", (T0, T0))
        except psycopg.errors.CheckViolation:
            conn.rollback()
        else:
            raise AssertionError("an unknown engine was stored")
    assert rows(empty_db, "SELECT steps, draft_tokens, histogram, engine FROM request_records "
                          "WHERE request_id = 'lc-1'") == [(None, 4, None, "llamacpp")]

    command.downgrade(cfg, PREVIOUS)
    assert rows(empty_db, "SELECT request_id, pool_id, num_spec_tokens, steps, draft_tokens, accepted, histogram "
                          "FROM request_records ORDER BY 1") == before
    assert rows(empty_db, "SELECT to_regclass('request_pool_engines')") == [(None,)]
