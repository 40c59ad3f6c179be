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
    assert fleet.refresh_snapshots(db, now=now, settings=settings) == [3600]
    assert fleet.refresh_snapshots(db, now=now - timedelta(seconds=10), settings=settings) == []  # not due
    assert fleet.refresh_snapshots(db, now=now - timedelta(seconds=10), settings=settings, force=True) == [3600]
    assert fleet.snapshot_body(db, window_seconds=3600, now=now, settings=settings) is not None
    from backend.db import snapshots
    assert snapshots.get(db, 3600).generated_at == now


def test_beat_runs_the_snapshot_task():
    s = Settings(_env_file=None, fleet_snapshot_interval_seconds=30)
    entry = beat_schedule(s)["snapshot-fleet-overview"]
    assert entry["task"] == FLEET_SNAPSHOT and entry["options"]["expires"] == 27


ALL = [3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400]


def test_long_windows_are_recomputed_less_often(db, now, pools):
    """Defaults: runs every 60 s; a window is due at 0.5 % of its length, at most every 15 min (less half a
    run of slack), so 1 h every run, 6 h every second, 24 h every seventh, 7 d and 30 d every fifteenth."""
    s = Settings(_env_file=None)
    assert [fleet.refresh_period(w, s) for w in ALL] == [60, pytest.approx(108), pytest.approx(432), 900, 900]
    t0 = now - timedelta(minutes=40)
    assert fleet.refresh_snapshots(db, now=t0, settings=s) == ALL  # nothing stored yet
    ran: dict[int, list[int]] = {w: [] for w in ALL}
    for m in range(1, 31):
        for w in fleet.refresh_snapshots(db, now=t0 + timedelta(minutes=m), settings=s):
            ran[w].append(m)
    assert ran[3600] == list(range(1, 31))
    assert ran[21600] == list(range(2, 31, 2))
    assert ran[86400] == [7, 14, 21, 28]
    assert ran[7 * 86400] == ran[30 * 86400] == [15, 30]
    from backend.db import snapshots
    assert snapshots.generated(db)[30 * 86400] == t0 + timedelta(minutes=30)
    assert fleet.refresh_snapshots(db, now=t0 + timedelta(minutes=30, seconds=10), settings=s) == []  # a retry
    assert fleet.refresh_snapshots(db, now=t0 + timedelta(minutes=30, seconds=10), settings=s, force=True) == ALL
    every_run = Settings(_env_file=None, fleet_snapshot_refresh_fraction=0)
    assert fleet.refresh_snapshots(db, now=t0 + timedelta(minutes=31), settings=every_run) == ALL
    assert {fleet.max_age(w, every_run) for w in ALL} == {180}


def test_a_long_window_is_served_while_within_its_longer_age(client, db, now, pools):
    s = Settings(_env_file=None)
    assert fleet.max_age(3600, s) == 180 and fleet.max_age(30 * 86400, s) == 1020
    taken = now - timedelta(seconds=1000)
    fleet.refresh_snapshots(db, now=taken, settings=s)
    make_bucket(db, pools, T0 + timedelta(minutes=1), drafts=1000, draft_tokens=5000, accepted_tokens=500)
    assert _rate(client.get("/api/v1/fleet", params={"window": "30d"}).json()) == pytest.approx(0.7)  # snapshot
    assert _rate(client.get("/api/v1/fleet", params={"window": "1h"}).json()) == pytest.approx(0.4)  # live
    assert fleet.snapshot_body(db, window_seconds=30 * 86400, now=taken + timedelta(seconds=1020), settings=s)
    assert fleet.snapshot_body(db, window_seconds=30 * 86400, now=taken + timedelta(seconds=1021), settings=s) is None


@pytest.mark.parametrize("bad", [{"fleet_snapshot_refresh_fraction": -0.1}, {"fleet_snapshot_refresh_fraction": 2},
                                 {"fleet_snapshot_max_period_seconds": -1}, {"fleet_snapshot_interval_seconds": 0}])
def test_bad_snapshot_periods_are_refused(bad):
    with pytest.raises(ValueError, match="fleet_snapshot"):
        Settings(_env_file=None, **bad)


def test_a_snapshot_from_a_clock_far_ahead_is_replaced(db, now, pools):
    """An overlapping run's slightly newer snapshot stays; one stamped hours ahead (a worker whose clock ran
    ahead) would block every run and never be served, so the next run replaces it."""
    from backend.db import snapshots
    s = Settings(_env_file=None, fleet_snapshot_windows=[3600])
    fleet.refresh_snapshots(db, now=now + timedelta(seconds=100), settings=s)
    assert fleet.refresh_snapshots(db, now=now, settings=s) == []
    assert fleet.refresh_snapshots(db, now=now, settings=s, force=True) == [3600]
    assert snapshots.generated(db)[3600] == now + timedelta(seconds=100)  # kept: newer, and not far ahead
    fleet.refresh_snapshots(db, now=now + timedelta(hours=2), settings=s)
    assert fleet.snapshot_body(db, window_seconds=3600, now=now, settings=s) is None
    assert fleet.refresh_snapshots(db, now=now, settings=s) == [3600]
    assert snapshots.generated(db)[3600] == now
    assert fleet.snapshot_body(db, window_seconds=3600, now=now, settings=s) is not None
