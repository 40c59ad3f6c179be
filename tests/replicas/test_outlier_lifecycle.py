"""replica_outlier through the alert cycle on stored replica rows: fires with the replica in its labels and
the Slack message, a silence matching the replica holds the notice back, and the silence API takes it."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from backend.config import Settings
from backend.db.models_alerts import AlertStateRow, AlertTransition
from backend.domain.records import BucketRecord, PoolKey, ReplicaKey
from backend.notify.slack import build_message
from backend.services import alerts
from backend.services.ingest import write_records
from backend.services.replicas import write_replicas

POOL = PoolKey("m", "chat", "eagle3")
RULES = {"version": 1, "rules": [{"name": "replica-outlier", "kind": "replica_outlier", "gap": 0.1, "window": 600,
                                  "for": 0, "keep_firing_for": 0, "min_drafts": 100}]}
SETTINGS = Settings(_env_file=None, alert_rules_file="/nonexistent/rules.yaml")


def _store(db, now, accepted: dict[str, float]) -> None:
    end = int(now.timestamp()) // 600 * 600
    write_records(db, [BucketRecord(pool=POOL, bucket_start=end - 60, drafts=1, draft_tokens=3, accepted_tokens=1)],
                  width=60, source="scrape", now=now)
    fine = [(ReplicaKey(name, "0"), BucketRecord(pool=POOL, bucket_start=end - 600, drafts=500, draft_tokens=1000,
                                                 accepted_tokens=a)) for name, a in accepted.items()]
    write_replicas(db, fine, grain=600, ends=[end], source="scrape", now=now)
    db.flush()


def test_the_outlier_fires_for_its_replica_and_a_replica_silence_holds_the_notice(db, now):
    _store(db, now, {"gpu-1": 800, "gpu-2": 790, "gpu-7": 500})
    alerts.store_config(db, RULES, source="test", by="test", now=now)
    alerts.create_silence(db, matchers={"replica": "gpu-7*"}, starts_at=now - timedelta(minutes=1),
                          ends_at=now + timedelta(hours=1), by="test", reason="draining gpu-7", now=now)
    counts = alerts.evaluate(db, settings=SETTINGS, now=now)
    assert counts["evaluated"] == 3
    states = {s.labels["replica"]: s for s in db.scalars(select(AlertStateRow))}
    assert {k: s.phase for k, s in states.items()} == {"gpu-1/0": "inactive", "gpu-2/0": "inactive",
                                                         "gpu-7/0": "firing"}
    assert states["gpu-7/0"].labels == {"model": "m", "traffic_class": "chat", "spec_mode": "eagle3",
                                        "replica": "gpu-7/0", "rule": "replica-outlier"}
    tr = db.scalar(select(AlertTransition).where(AlertTransition.to_phase == "firing"))
    assert tr.silence_id is not None and tr.notification is None  # silenced: no firing notice
    assert tr.values["alpha_others"] == (800 + 790) / 2000 and tr.value == 0.5


def test_the_slack_message_names_the_replica():
    item = {"event": "firing", "rule": "replica-outlier", "severity": "warning", "value": 0.5, "threshold": 0.695,
            "labels": {"model": "m", "traffic_class": "chat", "spec_mode": "eagle3", "replica": "gpu-7/0"}}
    msg = build_message({"model": "m", "title": "m: incident #1", "items": [item]})
    assert "replica gpu-7/0" in msg["text"]
    assert any("replica gpu-7/0" in b.get("text", {}).get("text", "") for b in msg["blocks"] if b["type"] == "section")


def test_the_silence_api_takes_a_replica_matcher(db, now):
    from backend.api.auth import create_token
    from tests.alerts.test_api import make_client

    client = make_client(db, now)
    token = create_token(db, name="op", role="operator", by="test", now=now)[1]
    body = {"matchers": {"replica": "gpu-7*", "model": "m"}, "reason": "draining gpu-7", "duration_seconds": 3600}
    r = client.post("/api/v1/silences", json=body, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code in (200, 201), r.text
    assert r.json()["matchers"] == {"replica": "gpu-7*", "model": "m"}
    bad = client.post("/api/v1/silences", json={**body, "matchers": {"pod": "x"}},
                      headers={"Authorization": f"Bearer {token}"})
    assert bad.status_code == 422 and "replica" in bad.text  # the known labels are listed


def test_replica_targets_read_pools_together_and_give_each_pool_its_own_window(db, now):
    """Pools whose replica windows end alike are read in one query per window; a pool whose newest replica
    bucket is older keeps its own window end. Each pool's sums are its own replicas' only."""
    from backend.services import alert_eval

    end = int(now.timestamp()) // 600 * 600
    pools = {"chat": PoolKey("m", "chat", "eagle3"), "code": PoolKey("m", "code", "eagle3"),
             "late": PoolKey("n", "chat", "eagle3")}
    for name, key in pools.items():
        write_records(db, [BucketRecord(pool=key, bucket_start=end - 60, drafts=1, draft_tokens=3, accepted_tokens=1)],
                      width=60, source="scrape", now=now)
        last = end - 600 if name == "late" else end  # "late" stopped reporting replica rows 10 minutes earlier
        fine = [(ReplicaKey(f"{name}-{i}", "0"), BucketRecord(pool=key, bucket_start=last - 600, drafts=500,
                                                              draft_tokens=1000, accepted_tokens=100 * (i + 1)))
                for i in range(2)]
        write_replicas(db, fine, grain=600, ends=[last], source="scrape", now=now)
    db.flush()
    targets = alert_eval.replica_targets(db, windows={600.0, 1800.0}, now=now, settings=SETTINGS)
    assert len(targets) == 6
    for (_model, cls, _mode, replica), t in targets.items():
        name = replica.split("-")[0]
        assert (t.labels["model"], cls) == ((pools[name].model_name, pools[name].traffic_class))
        want_end = end - 600 if name == "late" else end
        assert t.window_end.timestamp() == want_end
        assert {k.instance for k in t.replicas[600.0]} == {f"{name}-0", f"{name}-1"}  # its own replicas only
        i = int(replica.split("-")[1].split("/")[0])
        (bucket,) = t.replicas[600.0][t.replica].values()  # per coarse bucket: the one of this window
        assert bucket.accepted_tokens == 100 * (i + 1)


def _store_buckets(db, now, rows: dict[str, dict[int, float]]) -> None:
    """Replica rows of the coarse buckets ending 20, 10 and 0 minutes before the last 10-minute edge:
    rows[replica][i] is its accepted tokens (of 1000 draft tokens) in bucket i (0: the oldest)."""
    end = int(now.timestamp()) // 600 * 600
    write_records(db, [BucketRecord(pool=POOL, bucket_start=end - 60, drafts=1, draft_tokens=3, accepted_tokens=1)],
                  width=60, source="scrape", now=now)
    starts = [end - 1800, end - 1200, end - 600]
    fine = [(ReplicaKey(name, "0"), BucketRecord(pool=POOL, bucket_start=starts[i], drafts=500, draft_tokens=1000,
                                                 accepted_tokens=a))
            for name, per in rows.items() for i, a in per.items()]
    write_replicas(db, fine, grain=600, ends=[s + 600 for s in starts], source="scrape", now=now)
    db.flush()


def _phases(db, now) -> dict[str, str]:
    rules = {"version": 1, "rules": [{**RULES["rules"][0], "window": 1800}]}
    alerts.store_config(db, rules, source="test", by="test", now=now)
    alerts.evaluate(db, settings=SETTINGS, now=now)
    return {s.labels["replica"]: s.phase for s in db.scalars(select(AlertStateRow))}


def test_a_pool_wide_drop_raises_no_replica_outlier(db, now):
    """The whole pool drops from 0.80 to 0.30 in the newest bucket; gpu-3 joined in that bucket (over the
    window it reads 0.30 against its peers' 0.63): compared at the same time, nobody is an outlier."""
    _store_buckets(db, now, {"gpu-1": {0: 800, 1: 800, 2: 300}, "gpu-2": {0: 800, 1: 800, 2: 300},
                             "gpu-3": {2: 300}})
    assert _phases(db, now) == {"gpu-1/0": "inactive", "gpu-2/0": "inactive", "gpu-3/0": "inactive"}


def test_a_single_replica_drop_raises_its_replica_outlier(db, now):
    _store_buckets(db, now, {"gpu-1": {0: 800, 1: 800, 2: 800}, "gpu-2": {0: 800, 1: 800, 2: 800},
                             "gpu-3": {2: 300}})
    phases = _phases(db, now)
    assert phases == {"gpu-1/0": "inactive", "gpu-2/0": "inactive", "gpu-3/0": "firing"}
    tr = db.scalar(select(AlertTransition).where(AlertTransition.to_phase == "firing"))
    assert (tr.value, tr.values["alpha_others"]) == (0.3, 0.8)


def test_one_replica_that_drops_alone_in_its_pool_raises_no_replica_outlier(db, now):
    """One server (seeded history and live collection under one name): there is no peer to be unlike."""
    _store_buckets(db, now, {"chat-eagle3": {0: 700, 1: 700, 2: 300}})
    assert _phases(db, now) == {"chat-eagle3/0": "inactive"}
