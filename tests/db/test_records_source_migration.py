"""The migration that files per-request records under their engine's spec mode, from the schema before it,
with data: every pool keeps its id, every bucket, record and alert state is still there, the records pools
take the engine's spec mode (or the one given for a model without an engine pool), nothing reads
"per-request" afterwards; without the spec mode a records-only model needs, the upgrade stops and changes
nothing. And back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from alembic import command
from sqlalchemy import text

from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.domain.alerting import fingerprint
from backend.services import analytics
from backend.services.windows import Range
from tests.db.conftest import cfg_for, seeding
from tests.db.conftest import rows as _rows

PREVIOUS = "2026_12_05_model_senders"
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
# (model, class, spec mode, origin, K): m1 has one EAGLE-3 engine pool without a class label, a baseline, and
# per-request pools of chat and code; m2 exists only through per-request records
POOLS = [("m1", "default", "eagle3", "engine", 3), ("m1", "default", "off", "engine", None),
         ("m1", "chat", "per-request", "requests", 3), ("m1", "code", "per-request", "requests", 3),
         ("m2", "chat", "per-request", "requests", 4)]
# per pool (by position): (drafts, draft_tokens, accepted) in each of two buckets
BUCKETS = {0: (100.0, 300.0, 150.0), 2: (60.0, 180.0, 120.0), 3: (40.0, 120.0, 30.0), 4: (10.0, 40.0, 8.0)}


def _seed(url: str) -> dict[tuple, int]:
    with seeding(url, T0.date()) as s:
        ids = {}
        for m, c, mode, origin, k in POOLS:
            ids[(m, c, mode)] = s.execute(text(
                "INSERT INTO pools (model_name, traffic_class, spec_mode, num_spec_tokens, first_seen, last_seen, "
                "origin) VALUES (:m, :c, :s, :k, :f, :l, :o) RETURNING id"),
                {"m": m, "c": c, "s": mode, "k": k, "f": T0, "l": T0 + timedelta(minutes=2), "o": origin}).scalar()
        keys = list(ids)
        for i, (d, dt, a) in BUCKETS.items():
            for j in range(2):
                s.execute(text(
                    "INSERT INTO pool_buckets (pool_id, bucket_start, bucket_seconds, drafts, draft_tokens, "
                    "accepted_tokens, source, collected_at) VALUES (:p, :b, 60, :d, :dt, :a, :src, :b)"),
                    {"p": ids[keys[i]], "b": T0 + timedelta(minutes=j), "d": d, "dt": dt, "a": a,
                     "src": "scrape" if i == 0 else "requests"})
        for n, key in enumerate(keys[2:]):
            s.execute(text(
                "INSERT INTO request_records (request_id, pool_id, finish_time, labels, output_tokens, "
                "num_spec_tokens, steps, draft_tokens, accepted, histogram, received_at) "
                "VALUES (:r, :p, :t, CAST(:l AS jsonb), 50, 3, 2, 6, 3, '{0,1,0,1}', :t)"),
                {"r": f"req-{n}", "p": ids[key], "t": T0 + timedelta(seconds=30),
                 "l": json.dumps({"traffic_class": key[1]})})
        for labels in ({"model": "m1", "traffic_class": "chat", "spec_mode": "per-request"},
                       {"model": "m1", "traffic_class": "mixed", "spec_mode": "per-request"},
                       {"model": "m1", "traffic_class": "mixed", "spec_mode": "eagle3"}):
            s.execute(text(
                "INSERT INTO alert_states (fingerprint, rule, kind, severity, labels, group_key, phase, "
                "notified_firing) VALUES (:f, 'alpha_low', 'alpha_low', 'warning', CAST(:l AS jsonb), "
                "'model=m1', 'firing', false)"), {"f": fingerprint(labels), "l": json.dumps(labels)})
    return ids


def test_records_pools_move_to_their_engines_spec_mode_without_loss(empty_db: str, monkeypatch) -> None:
    cfg = cfg_for(empty_db)
    command.upgrade(cfg, PREVIOUS)
    ids = _seed(empty_db)
    buckets_before = _rows(empty_db, "SELECT pool_id, bucket_start, drafts, draft_tokens, accepted_tokens "
                                     "FROM pool_buckets ORDER BY 1, 2")
    records_before = _rows(empty_db, "SELECT request_id, pool_id, draft_tokens FROM request_records ORDER BY 1")

    # m2 has no engine pool to take a spec mode from: the upgrade stops, naming it, and changes nothing
    monkeypatch.delenv("SPECWATCH_RECORDS_SPEC_MODE", raising=False)
    with pytest.raises(RuntimeError, match="'m2' \\(no engine pool\\).*records_spec_mode"):
        command.upgrade(cfg, "head")
    assert _rows(empty_db, "SELECT version_num FROM alembic_version") == [(PREVIOUS,)]
    assert _rows(empty_db, "SELECT count(*) FROM pools WHERE spec_mode = 'per-request'") == [(3,)]

    monkeypatch.setenv("SPECWATCH_RECORDS_SPEC_MODE", "eagle3")
    command.upgrade(cfg, "head")
    pools = {r[0]: r[1:] for r in _rows(empty_db, "SELECT id, model_name, traffic_class, spec_mode, origin FROM pools")}
    assert pools == {ids[("m1", "default", "eagle3")]: ("m1", "default", "eagle3", "engine"),
                     ids[("m1", "default", "off")]: ("m1", "default", "off", "engine"),
                     ids[("m1", "chat", "per-request")]: ("m1", "chat", "eagle3", "requests"),
                     ids[("m1", "code", "per-request")]: ("m1", "code", "eagle3", "requests"),
                     ids[("m2", "chat", "per-request")]: ("m2", "chat", "eagle3", "requests")}
    assert _rows(empty_db, "SELECT pool_id, bucket_start, drafts, draft_tokens, accepted_tokens "
                           "FROM pool_buckets ORDER BY 1, 2") == buckets_before
    assert _rows(empty_db, "SELECT request_id, pool_id, draft_tokens FROM request_records ORDER BY 1") == records_before
    # the alert states: chat's takes the engine's spec mode; the records-only mixed row's target is the
    # engine's mixed row now, which has its own state
    states = sorted((json.dumps(lab, sort_keys=True), fp) for lab, fp in
                    _rows(empty_db, "SELECT labels, fingerprint FROM alert_states"))
    want = [{"model": "m1", "traffic_class": "chat", "spec_mode": "eagle3"},
            {"model": "m1", "traffic_class": "mixed", "spec_mode": "eagle3"}]
    assert states == sorted((json.dumps(w, sort_keys=True), fingerprint(w)) for w in want)

    # what the pages read: one spec mode, classes through the records, mixed = the engine's totals
    engine = make_engine(empty_db)
    try:
        with session_scope(make_sessionmaker(engine)) as s:
            settings = Settings(_env_file=None, bucket_seconds=60, stale_after_seconds=10**9)
            summary = analytics.summary(s, model_name="m1", rng=Range(T0, T0 + timedelta(minutes=2)),
                                        now=T0 + timedelta(minutes=2), settings=settings)
    finally:
        engine.dispose()
    rows = {(c.traffic_class, c.spec_mode): c for c in summary.classes}
    assert set(rows) == {("chat", "eagle3"), ("code", "eagle3"), ("mixed", "eagle3")}
    assert rows[("mixed", "eagle3")].volume.drafts == 200 and rows[("mixed", "eagle3")].acceptance_rate == 0.5
    assert rows[("chat", "eagle3")].acceptance_rate == 120 / 180 and rows[("chat", "eagle3")].source == "records"
    assert rows[("mixed", "eagle3")].records_coverage == (360 + 240) / 600

    command.downgrade(cfg, PREVIOUS)
    assert _rows(empty_db, "SELECT count(*) FROM pools WHERE spec_mode = 'per-request' AND origin = 'requests'") == [(3,)]
    assert _rows(empty_db, "SELECT pool_id, bucket_start, drafts, draft_tokens, accepted_tokens "
                           "FROM pool_buckets ORDER BY 1, 2") == buckets_before
