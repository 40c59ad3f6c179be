"""/fleet from the precomputed snapshots: served while fresh, bypassed when stale, for custom ranges or live=true."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backend.config import Settings
from backend.services import fleet
from tests.factories import T0, make_bucket, make_pool
from workers.schedule import FLEET_SNAPSHOT, beat_schedule


@pytest.fixture
def pools(db, now):
    chat = make_pool(db, traffic_class="chat", num_spec_tokens=5, last_seen=now)
    make_bucket(db, chat, T0, drafts=1000, draft_tokens=5000, accepted_tokens=3500, running_mean=4.0)
    return chat


def _rate(body: dict) -> float:
    return next(r for r in body["rows"] if r["traffic_class"] == "chat")["acceptance_rate"]


def test_fresh_snapshot_is_served_and_live_bypasses_it(client, db, now, pools):
    settings = Settings(_env_file=None)
    taken = now - timedelta(seconds=30)
    assert 3600 in fleet.refresh_snapshots(db, now=taken, settings=settings)
    make_bucket(db, pools, T0 + timedelta(minutes=1), drafts=1000, draft_tokens=5000, accepted_tokens=500)
    snap = client.get("/api/v1/fleet", params={"window": "1h"}).json()
    assert snap["generated_at"].startswith(taken.strftime("%Y-%m-%dT%H:%M:%S"))
    assert _rate(snap) == pytest.approx(0.7)  # the new bucket is not in the snapshot yet
    live = client.get("/api/v1/fleet", params={"window": "1h", "live": "true"}).json()
    assert _rate(live) == pytest.approx(4000 / 10000)
    custom = client.get("/api/v1/fleet", params={"start": (now - timedelta(hours=1)).isoformat()}).json()
    assert _rate(custom) == pytest.approx(0.4)  # explicit ranges are always live
    other = client.get("/api/v1/fleet", params={"window": "2h"}).json()
    assert _rate(other) == pytest.approx(0.4)  # not a snapshot window


def test_stale_snapshot_is_ignored(client, db, now, pools):
    settings = Settings(_env_file=None)
    fleet.refresh_snapshots(db, now=now - timedelta(seconds=settings.fleet_snapshot_max_age_seconds + 1),
                            settings=settings)
    make_bucket(db, pools, T0 + timedelta(minutes=1), drafts=1000, draft_tokens=5000, accepted_tokens=500)
    assert _rate(client.get("/api/v1/fleet", params={"window": "1h"}).json()) == pytest.approx(0.4)


def test_an_older_run_never_replaces_a_newer_snapshot(db, now, pools):
    settings = Settings(_env_file=None, fleet_snapshot_windows=[3600])
    fleet.refresh_snapshots(db, now=now, settings=settings)
    fleet.refresh_snapshots(db, now=now - timedelta(seconds=10), settings=settings)
    assert fleet.snapshot_body(db, window_seconds=3600, now=now, settings=settings) is not None
    from backend.db import snapshots
    assert snapshots.get(db, 3600).generated_at == now


def test_beat_runs_the_snapshot_task():
    s = Settings(_env_file=None, fleet_snapshot_interval_seconds=30)
    entry = beat_schedule(s)["snapshot-fleet-overview"]
    assert entry["task"] == FLEET_SNAPSHOT and entry["options"]["expires"] == 27
