"""The demo's history: seeded up to a bucket boundary early enough in a bucket for live collection to start
inside the next one, only the gap on a reused database, and handed over to the live simulator with its
zero state stored, so the first live bucket has its whole increase. The demo's rules and incident."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select

from backend.cli import demo_setup
from backend.config import Settings
from backend.db.models import PoolBucket
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.domain.alert_config import parse_config
from backend.scrape.assemble import PoolNaming, assemble
from backend.scrape.parse import SAMPLE_FAMILY
from backend.services.history import handover, seed_to_now, seeded_until
from backend.services.ingest import ts
from backend.services.scrape import stored_scrapes
from backend.sim.server import start_in_thread
from tests.support.clock import FakeClock


@pytest.fixture
def factory(fresh_db_url):
    engine = make_engine(fresh_db_url)
    yield make_sessionmaker(engine)
    engine.dispose()


def _buckets(factory) -> int:
    with session_scope(factory) as s:
        return s.scalar(select(func.count()).select_from(PoolBucket))


def test_seed_to_now_ends_on_a_boundary_and_fills_only_the_gap_later(factory):
    s = Settings(_env_file=None, bucket_seconds=60)
    clock = FakeClock(1_800_000_015.0)  # 15 s into a bucket
    end, runs = seed_to_now(factory, s, scenario="steady", seconds=600, tick=5.0, clock=clock, sleep=clock.sleep)
    assert end == 1_800_000_000.0 and len(runs) == 1 and runs[0].buckets == 10 and clock.sleeps == []
    assert seeded_until(factory) == end
    first = _buckets(factory)
    assert first > 0

    clock.t = end + 3 * 60 + 55  # three buckets later, and too close to the next boundary: wait for it
    end2, runs2 = seed_to_now(factory, s, scenario="steady", seconds=600, tick=5.0, clock=clock, sleep=clock.sleep)
    assert end2 == end + 4 * 60 and [r.buckets for r in runs2] == [3, 1] and len(clock.sleeps) == 1
    assert seeded_until(factory) == end2
    assert _buckets(factory) == first * 14 // 10  # 10 buckets, then the 4 of the gap: nothing twice


def test_handover_stores_the_live_simulators_zero_state(factory):
    s = Settings(_env_file=None, bucket_seconds=60)
    start = float(int(time.time()) - 5)
    with start_in_thread("steady", start=start) as sim:
        targets = [{"url": f"{sim.url}/pools/chat-{m}/metrics", "labels": {"traffic_class": "chat", "spec_mode": m}}
                   for m in ("eagle3", "off")]
        s = s.model_copy(update={"scrape_targets": Settings(_env_file=None, scrape_targets=targets).scrape_targets})
        out = handover(factory, s, start=start, now=time.time())
    assert out["stored"] == 2 and out["zero_samples_at"] == start
    with session_scope(factory) as session:
        scrapes = stored_scrapes(session, since=ts(0), until=ts(start + 86400))
    zero = [sc for sc in scrapes if sc.ts == start]
    live = [sc for sc in scrapes if sc.ts > start]
    assert len(zero) == 2 and len(live) == 2
    for z in zero:
        assert z.layout.size and not z.values.any()
        assert all(SAMPLE_FAMILY[n].kind != "gauge" for n in z.layout.names)
    # the buckets up to the first live sample hold the whole growth since the simulator started, not a
    # partial one (split between two buckets in proportion to time when the interval straddles a boundary)
    t1 = live[0].ts
    b = int(-(-t1 // 60) * 60) - 60
    b0 = int(start // 60) * 60
    records = assemble(scrapes, target_labels={t["url"]: t["labels"] for t in targets}, width=60, first_bucket=b0,
                       last_bucket=b, max_gap=300, naming=PoolNaming("traffic_class", "spec_mode", "default", "on"))
    spec = [r for (k, _b), r in records.items() if k.spec_mode == "eagle3"]
    eagle = next(sc for sc in live if "chat-eagle3" in sc.target)
    drafts_at_t1 = sum(v for n, v in zip(eagle.layout.names, eagle.values.tolist(), strict=True)
                       if n == "vllm:spec_decode_num_drafts_total")
    assert sum(r.drafts or 0 for r in spec) == drafts_at_t1 > 0


def test_demo_rules_are_valid_and_scaled_to_the_bucket():
    cfg = parse_config(demo_setup.demo_rules(10))
    alpha = next(r for r in cfg.rules if r.name == "alpha-low")
    assert [r.name for r in cfg.rules if r.kind == "alpha_low"] == ["alpha-low"]
    raw = demo_setup.demo_rules(10)["rules"][0]
    assert (raw["short_window"], raw["long_window"], raw["for"], raw["keep_firing_for"]) == ("20s", "50s", "10s", "10s")
    assert alpha is not None and {"traffic_class": "code"} in [o["match"] for o in raw["overrides"]]


def test_the_incident_is_scheduled_on_the_running_simulator():
    """POST /events changes a pool's acceptance from a future moment on; the past stays as it was."""
    import httpx

    assert demo_setup.incident_pool(demo_setup.scenario_dict("steady")) == ("chat-eagle3", {"mode": "rate", "r": 0.70})
    clock = FakeClock(1_800_000_000.0)
    with start_in_thread("steady", clock=clock, tick=1.0, background_sync=None) as sim:
        pool = demo_setup.schedule_incident(sim.url, demo_setup.scenario_dict("steady"), after=10, seconds=20)
        assert pool == "chat-eagle3"
        fleet = sim.sim.fleet
        idx = next(i for i, p in enumerate(fleet.pools) if p.spec.id == "chat-eagle3")
        normal = fleet.states[idx].acc
        clock.t += 15
        sim.sim.sync()
        dropped = fleet.states[idx].acc
        clock.t += 20
        sim.sim.sync()
        assert dropped != normal and fleet.states[idx].acc == normal
        bad = httpx.post(f"{sim.url}/events", json={"pool": "chat-off", "in_seconds": 5,
                                                      "acceptance": {"mode": "rate", "r": 0.3}})
        assert bad.status_code == 422 and "baseline" in bad.json()["error"]
        assert httpx.post(f"{sim.url}/events", json={"pool": "nope", "in_seconds": 5, "acceptance": {}}).status_code == 404
        nan = b'{"pool": "chat-eagle3", "in_seconds": NaN, "acceptance": {"mode": "rate", "r": 0.3}}'
        assert httpx.post(f"{sim.url}/events", content=nan).status_code == 422
        assert httpx.post(f"{sim.url}/events", json={"pool": "chat-eagle3", "in_seconds": 5,
                                                      "acceptance": {"mode": "rate", "r": 1.5}}).status_code == 422


def test_seeded_history_and_live_collection_are_one_replica_per_pool(factory):
    """The demo seeds history from the simulator's fleet /metrics, then collects the live simulator's
    per-pool endpoints (demo.scrape_targets): both name a pool's server alike (its `instance`, the pool id
    by default, whatever port the simulator runs on), so each pool has one replica whose rows run from the
    history into live collection."""
    from datetime import UTC, datetime

    from backend.cli.demo import scrape_targets
    from backend.db import replica_repo
    from backend.db.models import Pool
    from backend.services import scrape
    from tests.support.deadline import deadline

    s = Settings(_env_file=None, bucket_seconds=2, replica_bucket_seconds=4, scrape_interval_seconds=1,
                 settle_seconds=1)
    end, _runs = seed_to_now(factory, s, scenario="steady", seconds=16, tick=0.5)
    with start_in_thread("steady", start=end) as sim:
        targets = scrape_targets(sim.url)
        assert {t["labels"]["instance"] for t in targets} == {"chat-eagle3", "chat-off", "code-eagle3", "code-off"}
        live = s.model_copy(update={"scrape_targets": Settings(_env_file=None, scrape_targets=targets).scrape_targets})
        handover(factory, live, start=end, now=time.time())
        give_up = time.monotonic() + deadline(120)
        while True:  # collect as the worker would, until a live replica bucket (after the seam's) is stored
            now = datetime.now(UTC)
            scrape.scrape_targets(factory, live, now=now)
            scrape.finalize(factory, live, now=now)
            with session_scope(factory) as session:
                pools = list(session.scalars(select(Pool)))
                replicas = replica_repo.replicas_of(session, [p.id for p in pools])
                names = {p.id: f"{p.traffic_class}-{p.spec_mode}" for p in pools}
                seen = [(names[r.pool_id], r.instance, r.engine, r.first_seen.timestamp(), r.last_seen.timestamp())
                        for r in replicas]
            if seen and all(last >= end + 2 * s.replica_grain for *_x, last in seen):
                break
            assert time.monotonic() < give_up, seen
            time.sleep(0.5)
    assert sorted((pool, instance, engine) for pool, instance, engine, _f, _l in seen) == [
        ("chat-eagle3", "chat-eagle3", "0"), ("chat-off", "chat-off", "0"),
        ("code-eagle3", "code-eagle3", "0"), ("code-off", "code-off", "0")]
    assert all(first < end for *_x, first, _l in seen)  # the same replica's rows began in the seeded history
