"""The evaluation cycle on seeded history (real Postgres, rollback per test, explicit `now`)."""

from __future__ import annotations

from datetime import timedelta

from backend.services import alerts
from tests.alerts.conftest import outbox_rows, rules, run_minutes, setup, state, transitions


def test_fires_after_for_with_audit_values_and_one_message(db, settings, now):
    pool = setup(db, settings, now)
    start = now - timedelta(minutes=30)
    t = run_minutes(db, settings, pool, start, [0.70] * 10 + [0.45] * 10)
    s = state(db)
    assert s.phase == "firing"
    trs = [tr for tr in transitions(db) if tr.alert_id == s.id]
    assert [(tr.from_phase, tr.to_phase) for tr in trs] == [("inactive", "pending"), ("pending", "firing")]
    fired = trs[-1]
    # pending at the minute both windows went below (alpha_long < 0.55 needs > half of 10 min low)
    assert fired.values["alpha_short"] < 0.55 and fired.values["alpha_long"] < 0.55
    assert fired.values["drafts_long"] >= 1000 and fired.values["k"] == 3
    assert fired.at - trs[0].at >= timedelta(seconds=120)
    msgs = outbox_rows(db)
    assert len(msgs) == 1 and msgs[0].kind == "firing"
    item = msgs[0].payload["items"][0]
    assert item["rule"] == "alpha-low" and item["threshold"] == 0.55 and item["value"] < 0.55
    assert item["dashboard_url"].startswith("http://dash.local/pools?model=")
    assert "Hold the rollout" in item["runbook"]
    assert t > fired.at


def test_recovery_needs_margin_then_resolves_once(db, settings, now):
    pool = setup(db, settings, now)
    t = run_minutes(db, settings, pool, now - timedelta(hours=1), [0.45] * 14)
    assert state(db).phase == "firing"
    t = run_minutes(db, settings, pool, t, [0.565] * 12)  # above 0.55, below 0.58: hysteresis holds
    assert state(db).phase == "firing"
    run_minutes(db, settings, pool, t, [0.70] * 6)
    assert state(db).phase == "resolved"
    kinds = [m.kind for m in outbox_rows(db)]
    assert kinds == ["firing", "resolved"]
    resolved = next(tr for tr in transitions(db) if tr.to_phase == "resolved")
    assert resolved.values["alpha_short"] >= 0.58


def test_flapping_around_threshold_is_not_a_storm(db, settings, now):
    pool = setup(db, settings, now)
    flap = [0.53, 0.57] * 40  # alternates every evaluation for 80 minutes
    run_minutes(db, settings, pool, now - timedelta(hours=2), flap)
    msgs = outbox_rows(db)
    assert len(msgs) <= 2, [m.kind for m in msgs]


def test_low_volume_pool_never_alerts(db, settings, now):
    pool = setup(db, settings, now)
    run_minutes(db, settings, pool, now - timedelta(hours=1), [0.10] * 30, drafts=20)  # 200 drafts per 10 min
    s = state(db)
    assert s.phase == "inactive" and s.last_status == "no_data"
    assert outbox_rows(db) == []


def test_stale_data_raises_stale_and_does_not_resolve(db, settings, now):
    pool = setup(db, settings, now)
    t = run_minutes(db, settings, pool, now - timedelta(hours=1), [0.45] * 14)
    assert state(db).phase == "firing"
    run_minutes(db, settings, pool, t, [None] * 10)  # the pool goes silent
    assert state(db).phase == "firing", "missing data must never resolve"
    assert state(db, "stale-data").phase == "firing"
    kinds = [(m.kind, m.payload["items"][0]["rule"]) for m in outbox_rows(db)]
    assert kinds == [("firing", "alpha-low"), ("firing", "stale-data")]


def test_silence_suppresses_and_expiry_restores(db, settings, now):
    pool = setup(db, settings, now)
    start = now - timedelta(hours=1)
    sil = alerts.create_silence(db, matchers={"model": pool.model_name, "rule": "alpha-*"}, starts_at=start,
                                ends_at=start + timedelta(minutes=20), by="ops@example", reason="drafter swap",
                                now=start)
    t = run_minutes(db, settings, pool, start, [0.45] * 15)
    assert state(db).phase == "firing"
    assert outbox_rows(db) == []
    firing = next(tr for tr in transitions(db) if tr.to_phase == "firing")
    assert firing.silence_id == sil.id and firing.notification is None
    run_minutes(db, settings, pool, t, [0.45] * 6)  # the silence ends at minute 20
    msgs = outbox_rows(db)
    assert [m.kind for m in msgs] == ["firing"]
    assert [tr.reason for tr in transitions(db)][-1].startswith("silence ended")


def test_grouping_one_incident_per_model(db, settings, now):
    chat = setup(db, settings, now)
    from tests.factories import make_pool

    code = make_pool(db, traffic_class="code", first_seen=now - timedelta(hours=1), last_seen=now - timedelta(hours=1))
    t = now - timedelta(hours=1)
    from tests.alerts.conftest import seed_minute
    for _ in range(14):
        t += timedelta(seconds=60)
        seed_minute(db, chat, t, 0.45)
        seed_minute(db, code, t, 0.45)
        alerts.evaluate(db, settings=settings, now=t)
    msgs = outbox_rows(db)
    # chat, code and the model's mixed traffic fire in the same cycle: one message, one incident
    assert len(msgs) == 1
    assert {i["labels"]["traffic_class"] for i in msgs[0].payload["items"]} == {"chat", "code", "mixed"}
    assert msgs[0].incident_id is not None


def test_rerun_at_same_instant_changes_nothing(db, settings, now):
    pool = setup(db, settings, now)
    t = run_minutes(db, settings, pool, now - timedelta(hours=1), [0.45] * 14)
    before = (len(transitions(db)), len(outbox_rows(db)))
    alerts.evaluate(db, settings=settings, now=t)
    assert (len(transitions(db)), len(outbox_rows(db))) == before


def test_override_per_class(db, settings, now):
    cfg = rules(overrides=[{"match": {"traffic_class": "chat"}, "threshold": 0.40}])
    pool = setup(db, settings, now, config=cfg)
    run_minutes(db, settings, pool, now - timedelta(hours=1), [0.45] * 14)
    assert state(db).phase == "inactive"
