"""Replicas end to end on the direct-scrape path: the simulator's `bad-replica` scenario seeded through the
collector's own parse -> exact increases -> checks -> upsert (services.history), then the alert cycle run at
successive evaluation times. One bad replica fires `replica_outlier` for itself only and resolves once it
recovers; equal replicas never fire; the replica rows sum to the pool rows exactly."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from sqlalchemy import select

from backend.config import Settings
from backend.db.models import Pool, PoolBucket
from backend.db.models_alerts import AlertStateRow, AlertTransition
from backend.db.models_replicas import Replica, ReplicaBucket
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.services import alerts
from backend.services.history import seed_history
from backend.sim.scenario import SCENARIO_DIR

START = 1_800_000_000  # a multiple of 300: the seeded history starts on a coarse bucket edge
SECONDS = 4500  # 15 min healthy, 30 min replica-2 bad, 30 min recovered
RULES = {"version": 1, "rules": [
    {"name": "replica-outlier", "kind": "replica_outlier", "gap": 0.1, "recover_margin": 0.02, "window": 900,
     "for": 300, "keep_firing_for": 300, "min_drafts": 500},
    {"name": "alpha-low", "kind": "alpha_low", "threshold": 0.55, "short_window": 300, "long_window": 900,
     "for": 120, "min_drafts": 500},
]}


def _seed(url: str, scenario) -> Settings:
    s = Settings(_env_file=None, bucket_seconds=60, replica_bucket_seconds=300,
                 alert_rules_file="/nonexistent/rules.yaml")  # the test's rules only (not alerts.example.yaml)
    engine = make_engine(url)
    try:
        seed_history(make_sessionmaker(engine), s, scenario=scenario, seconds=SECONDS, end=START + SECONDS,
                     seed=7, scrape_interval=30.0, tick=5.0)
    finally:
        engine.dispose()
    return s


def _evaluate_through(url: str, s: Settings, *, first: int, last: int, step: int = 60) -> None:
    engine = make_engine(url)
    factory = make_sessionmaker(engine)
    try:
        with session_scope(factory) as session:
            alerts.store_config(session, RULES, source="test", by="test", now=datetime.fromtimestamp(first, UTC))
        for t in range(first, last + 1, step):
            with session_scope(factory) as session:
                alerts.evaluate(session, settings=s, now=datetime.fromtimestamp(t, UTC))
    finally:
        engine.dispose()


def _transitions(url: str) -> list[tuple[str, str, str, float]]:
    """(rule, replica or '', phase entered, at) in order."""
    engine = make_engine(url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            rows = session.execute(select(AlertStateRow.rule, AlertStateRow.labels, AlertTransition.to_phase,
                                          AlertTransition.at).join(AlertStateRow, AlertStateRow.id == AlertTransition.alert_id)
                                   .order_by(AlertTransition.id)).all()
            return [(r, lab.get("replica", ""), ph, at.timestamp()) for r, lab, ph, at in rows]
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def bad(pg_admin_url, pg_template):
    from tests.support import db as dbsupport

    name, url = dbsupport.clone(pg_admin_url, pg_template)
    s = _seed(url, "bad-replica")
    _evaluate_through(url, s, first=START + 600, last=START + SECONDS)
    yield url
    dbsupport.drop_database(pg_admin_url, name)


def test_the_bad_replica_fires_for_itself_only_and_resolves_after_it_recovers(bad):
    trs = _transitions(bad)
    outlier = [(rep, ph, at) for rule, rep, ph, at in trs if rule == "replica-outlier"]
    assert {rep for rep, _ph, _at in outlier} == {"replica-2/0"}, outlier  # no other replica even went pending
    phases = [ph for _rep, ph, _at in outlier]
    assert phases == ["pending", "firing", "resolved"], outlier
    fired = next(at for _r, ph, at in outlier if ph == "firing")
    resolved = next(at for _r, ph, at in outlier if ph == "resolved")
    # fires during the bad hour (after the 15-minute window filled and `for` passed), resolves after recovery
    assert START + 900 < fired < START + 2700, fired - START
    assert START + 2700 < resolved <= START + 2700 + 900 + 300 + 300, resolved - START
    # the pool's own alpha never crossed 0.55: one bad replica of four shows only per replica
    assert not [t for t in trs if t[0] == "alpha-low"], trs
    engine = make_engine(bad)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            tr = session.execute(select(AlertTransition.values).where(AlertTransition.to_phase == "firing")).scalar_one()
    finally:
        engine.dispose()
    assert tr["alpha_others"] - tr["alpha_replica"] > 0.1 and tr["replicas"] == 4
    assert tr["drafts_replica"] >= 500 and tr["drafts_others"] >= 500


def _sums(rows) -> dict[tuple[int, datetime], dict]:
    """Per (pool, start): the sum of each counter and of each slot of the array counters of the rows."""
    out: dict[tuple[int, datetime], dict] = defaultdict(lambda: defaultdict(float))
    for pool_id, start, b in rows:
        acc = out[(pool_id, start)]
        for name in ("drafts", "draft_tokens", "accepted_tokens", "tpot_count", "itl_count"):
            v = getattr(b, name)
            acc[name] += v if v is not None else 0.0
        for name in ("accepted_per_pos", "tpot_buckets", "itl_buckets"):
            for i, v in enumerate(getattr(b, name) or []):
                acc[(name, i)] += v
    return out


def test_replica_rows_sum_to_the_pool_rows_exactly(bad):
    engine = make_engine(bad)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            pools = {p.id: p for p in session.scalars(select(Pool))}
            reps = {r.id: r for r in session.scalars(select(Replica))}
            coarse = list(session.scalars(select(ReplicaBucket)))
            fine = list(session.scalars(select(PoolBucket)))
    finally:
        engine.dispose()
    spec = [pid for pid, p in pools.items() if p.spec_mode == "eagle3"]
    assert len(spec) == 1 and sorted(r.instance for r in reps.values() if r.pool_id == spec[0]) == \
        ["replica-0", "replica-1", "replica-2", "replica-3"]
    grain = {b.bucket_seconds for b in coarse}
    assert grain == {300}
    rsum = _sums((reps[b.replica_id].pool_id, b.bucket_start, b) for b in coarse)
    psum = _sums((b.pool_id, b.bucket_start - timedelta(seconds=b.bucket_start.timestamp() % 300), b) for b in fine)
    assert len(rsum) == len(pools) * SECONDS // 300  # every pool (baseline too: its TPOT/ITL), every 5 minutes
    assert set(rsum) == set(psum)
    checked = 0
    for key, acc in rsum.items():
        assert dict(acc) == dict(psum[key]), key  # integers: float sums are exact in any order
        checked += 1
    assert checked and any(acc["drafts"] > 0 for acc in rsum.values())


def test_equal_replicas_never_fire(pg_admin_url, pg_template):
    from tests.support import db as dbsupport

    doc = yaml.safe_load((SCENARIO_DIR / "bad-replica.yaml").read_text())
    doc["events"], doc["phases"] = [], []
    name, url = dbsupport.clone(pg_admin_url, pg_template)
    try:
        s = _seed(url, doc)
        _evaluate_through(url, s, first=START + 600, last=START + SECONDS, step=120)
        trs = _transitions(url)
        assert not [t for t in trs if t[0] == "replica-outlier"], trs
        engine = make_engine(url)
        try:
            with session_scope(make_sessionmaker(engine)) as session:
                states = list(session.scalars(select(AlertStateRow).where(AlertStateRow.rule == "replica-outlier")))
                # it was evaluated: one state per replica, each last seen ok (not no_data)
                assert sorted(st.labels["replica"] for st in states) == [f"replica-{i}/0" for i in range(4)]
                assert {st.last_status for st in states} == {"ok"}
        finally:
            engine.dispose()
    finally:
        dbsupport.drop_database(pg_admin_url, name)
