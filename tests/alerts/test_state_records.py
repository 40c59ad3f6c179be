"""Alert states as plain records: read, stepped and written back in one statement (real Postgres)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from backend.db import alert_repo as repo
from backend.db.models_alerts import AlertStateRow
from tests.alerts.conftest import outbox_rows, run_minutes, setup, state


def _new(db, fp: str, **kw) -> repo.StateRecord:
    values = {"fingerprint": fp, "rule": "r", "kind": "alpha_low", "severity": "page",
              "labels": {"model": "m", "rule": "r"}, "group_key": "m", "phase": "inactive", "notified_firing": False}
    return repo.add_state_record(db, **{**values, **kw})


def test_records_round_trip_every_saved_column(db, now):
    a, b = _new(db, "a" * 32), _new(db, "b" * 32, acked_by="op", acked_at=now, last_value=0.5,
                                         last_values={"x": 1})
    assert a.id and b.id and a.id != b.id and a.labels == {"model": "m", "rule": "r"}
    loaded = {r.fingerprint: r for r in repo.state_records(db, for_update=True)}
    assert loaded["b" * 32] == b and loaded["a" * 32] == a
    orm_b = db.get(AlertStateRow, b.id)  # a mapped copy loaded before the write must not go stale
    assert orm_b.acked_by == "op"
    a.phase, a.pending_since, a.firing_since, a.last_bad_at = "firing", now - timedelta(minutes=3), now, now
    a.resolved_at, a.last_eval_at, a.last_status, a.last_value = now - timedelta(days=1), now, "breached", 0.4125
    a.last_values = {"alpha_short": 0.41, "reason": "below", "nested": {"k": [1, 2, None]}}
    a.notified_firing, a.acked_by, a.acked_at = True, "someone", now
    b.phase, b.acked_by, b.acked_at, b.last_value, b.last_values = "resolved", None, None, None, None
    assert repo.save_states(db, [a, b]) == 2
    after = {r.id: r for r in repo.state_records(db)}
    assert after[a.id] == a and after[b.id] == b
    assert orm_b.phase == "resolved" and orm_b.acked_by is None and orm_b.last_values is None
    assert repo.save_states(db, []) == 0


def test_all_null_columns_are_written(db, now):
    rows = [_new(db, f"{i:032d}", pending_since=now, last_status="ok", last_value=1.0) for i in range(3)]
    for r in rows:
        r.pending_since = r.last_status = r.last_value = None
        r.last_eval_at = now
    repo.save_states(db, rows)
    got = db.execute(select(AlertStateRow.pending_since, AlertStateRow.last_status, AlertStateRow.last_value,
                            AlertStateRow.last_eval_at).order_by(AlertStateRow.id)).all()
    assert got == [(None, None, None, now)] * 3


def test_firing_alert_keeps_its_incident_in_the_database(db, settings, now):
    pool = setup(db, settings, now)
    run_minutes(db, settings, pool, now - timedelta(minutes=30), [0.70] * 10 + [0.45] * 10)
    s = state(db)
    db.refresh(s)
    msgs = outbox_rows(db)
    assert s.phase == "firing" and s.notified_firing is True and s.last_status == "breached"
    assert msgs and s.incident_id == msgs[0].incident_id is not None


def test_a_value_too_long_for_its_column_is_refused_not_cut(db, now):
    a = _new(db, "c" * 32)
    a.acked_by = "x" * 121  # acked_by is varchar(120)
    with pytest.raises(DBAPIError, match="too long"), db.begin_nested():
        repo.save_states(db, [a])
    assert db.get(AlertStateRow, a.id).acked_by is None
