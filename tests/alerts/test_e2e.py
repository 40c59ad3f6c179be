"""End to end on real services: the simulator's `drift` scenario scraped by a real Celery worker (beat
schedules scrape, evaluate and deliver every second), Postgres, Redis and the local Slack receiver."""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select

from backend.cli.demo import scrape_targets
from backend.config import Settings
from backend.db.models_alerts import AlertTransition, OutboxMessage
from backend.db.session import session_scope
from backend.domain import alerting as al
from backend.notify.delivery import SecretBox
from backend.services import alerts, outbox
from backend.sim.server import start_in_thread
from tests.support.procs import Proc
from tests.support.slack import SlackReceiver
from tests.support.stack import ROOT, env_for, factory_for, flush_redis, start_beat, wait_until

pytestmark = pytest.mark.e2e
SECRET_PARTS = ("T00000000", "B00000000", "XXXXXXXXXXXXXXXXXXXXXXXX")
RULES = {"version": 1, "rules": [
    {"name": "alpha-low", "kind": "alpha_low", "threshold": 0.55, "recover_margin": 0.03, "short_window": 3,
     "long_window": 8, "for": 2, "keep_firing_for": 2, "min_drafts": 100},
    {"name": "stale-data", "kind": "stale_data", "after": 30, "for": 0, "keep_firing_for": 0},
]}
RECOVER_AT = 1e6  # far in the future: the test brings the recovery forward once the firing message arrived


def start_worker(env: dict[str, str], log_dir: Path, name: str = "worker") -> Proc:
    """A worker with a thread pool, so a pacing delivery does not hold up scrape and evaluate."""
    args = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "--loglevel=INFO",
            "--pool=threads", "--concurrency=4", "--without-gossip", "--without-mingle", "-n", f"{name}@%h"]
    return Proc(name, args, log_dir / f"{name}.log", env=env, cwd=ROOT).start()


def recover_now(handle, pool_id: str = "chat-eagle3", lead: float = 1.0) -> None:
    """Bring the scenario's recovery event forward to `lead` seconds of simulated time from now, so the
    firing message (an event), not the wall clock, decides when the pool recovers: however slow the
    machine, the alert fires on the drift before the pool recovers."""
    sim = handle.sim
    with sim.lock:
        sim.fleet.advance_to(sim.tick_at(sim.clock()))
        at = sim.fleet.n + max(1, round(lead / sim.tick))
        pool = next(p for p in sim.fleet.pools if p.spec.id == pool_id)
        assert pool.changes, "the scenario has a recovery event to bring forward"
        pool.changes = [(at, order, acc, conc) for _, order, acc, conc in pool.changes]


def drift_with_recovery() -> dict:
    doc = yaml.safe_load((ROOT / "backend/sim/scenarios/drift.yaml").read_text())
    doc["events"] = [{"pool": "chat-eagle3", "at": RECOVER_AT, "acceptance": {"mode": "rate", "r": 0.80}}]
    return doc


def base_env(db_url: str, redis_url: str, **extra) -> dict[str, object]:
    return {"database_url": db_url, "redis_url": redis_url, "alert_rules_file": "/nonexistent/rules.yaml",
            "alert_eval_interval_seconds": 1, "alert_deliver_interval_seconds": 1,
            "alert_deliver_max_run_seconds": 3, "alert_retry_base_seconds": 0.5, "collect_interval_seconds": 1,
            # the weekly digest is due by the wall clock (any run after its weekday and time on a fresh
            # database sends last week's): these tests count alert messages, so it stays off here
            "digest_enabled": False, **extra}


def prepare(db_url: str, receiver: SlackReceiver, **options) -> None:
    factory = factory_for(db_url)
    now = datetime.now(UTC)
    with session_scope(factory) as s:
        alerts.store_config(s, RULES, source="test", by="test", now=now)
        outbox.create_channel(s, name="slack-main", kind="slack", url=receiver.webhook_url, token=None,
                              options=options, matchers={}, box=SecretBox(Settings(_env_file=None).secret_key), now=now)
    factory.kw["bind"].dispose()


def events(receiver: SlackReceiver) -> list[str]:
    out = []
    for r in receiver.delivered:
        body = r.json
        out.append(body["text"])
    return out


def assert_no_secret_in_logs(*procs: Proc) -> None:
    for p in procs:
        text = p.log_path.read_text(errors="replace")
        for part in SECRET_PARTS:
            assert part not in text, f"webhook URL leaked into {p.name}.log"


def test_drift_fires_and_resolves_once_through_429_and_500(fresh_db_url, redis_url, tmp_path):
    flush_redis(redis_url)
    with SlackReceiver() as slack, start_in_thread(drift_with_recovery(), seed=3) as sim:
        prepare(fresh_db_url, slack)
        slack.fail_next("rate_limited", n=1, retry_after=2)
        slack.fail_next("rollup_error", n=3)  # then 500 three times (backoff 0.5 s, 1 s, 2 s)
        env = env_for(base_env(fresh_db_url, redis_url, source="scrape", bucket_seconds=1, scrape_interval_seconds=1,
                               settle_seconds=1, stale_after_seconds=30,
                               scrape_targets=json.dumps(scrape_targets(sim.url))))
        worker, beat = start_worker(env, tmp_path), start_beat(env, tmp_path)
        sent = lambda: [r.status for r in slack.requests]
        try:
            wait_until(lambda: slack.delivered, 300, "the firing message", (worker, beat), seen=sent)
            first = slack.delivered[0].json
            assert "FIRING alpha-low" in first["text"]
            assert "vs threshold 0.550" in str(first["blocks"])
            recover_now(sim)
            wait_until(lambda: len(slack.delivered) >= 2, 300, "the resolved message", (worker, beat), seen=sent)
            time.sleep(4)  # anything extra would show up now
        finally:
            worker.stop()
            beat.stop()
        texts = events(slack)
        assert len(texts) == 2, texts
        assert "RESOLVED alpha-low" in texts[1]
        statuses = [r.status for r in slack.requests]
        assert statuses == [429, 500, 500, 500, 200, 200], statuses
        factory = factory_for(fresh_db_url)
        with session_scope(factory) as s:
            trs = list(s.scalars(select(AlertTransition).order_by(AlertTransition.id)))
            alpha = [t for t in trs if t.reason and t.values and "alpha_long" in t.values]
            assert [t.to_phase for t in alpha if t.notification] == ["firing", "resolved"]
            # it fired only after breaching for the rule's `for` (2 s), as the evaluator's clock saw it, less
            # the tick tolerance (a tenth of the 1 s evaluation interval, domain/alerting.py)
            fired = next(t for t in alpha if t.to_phase == "firing")
            pending = [t for t in alpha if t.to_phase == "pending" and t.id < fired.id][-1]
            least = RULES["rules"][0]["for"] - al.for_tolerance(base_env("", "")["alert_eval_interval_seconds"])
            assert (fired.at - pending.at).total_seconds() >= least, (pending.at, fired.at)
            assert all(m.status == "delivered" for m in s.scalars(select(OutboxMessage)))
        factory.kw["bind"].dispose()
        assert_no_secret_in_logs(worker, beat)


def _enqueue(db_url: str, n: int) -> None:
    factory = factory_for(db_url)
    now = datetime.now(UTC)
    with session_scope(factory) as s:
        from backend.db import alert_repo as repo

        ch = repo.channel_by_name(s, "slack-main")
        for i in range(n):
            repo.enqueue(s, idempotency_key=f"kill-{i}", channel_id=ch.id, incident_id=None, kind="firing",
                         payload={"title": f"message {i}", "model": "m", "at": now.isoformat(), "items": []},
                         status="pending", attempts=0, next_attempt_at=now, created_at=now, in_doubt=False)
    factory.kw["bind"].dispose()


class SlowSlack(SlackReceiver):
    """Holds every request `delay` seconds before recording and answering it (a slow Slack)."""

    delay = 0.0

    def _next_failure(self):
        rule = super()._next_failure()
        if self.delay:
            time.sleep(self.delay)
        return rule


@pytest.mark.parametrize("where", ["between-messages", "request-in-flight"])
def test_sigkill_mid_delivery_causes_no_duplicate(fresh_db_url, redis_url, tmp_path, where):
    flush_redis(redis_url)
    n = 5
    with SlowSlack() as slack:
        # in flight, the sender cannot know whether Slack got it: this channel opts for on_doubt: skip
        # between messages: a 5 s pace leaves a wide gap to kill the sender in, once message 2 is recorded
        # as delivered and nothing is being sent (the outbox says so, not a sleep)
        options = {"on_doubt": "skip"} if where == "request-in-flight" else {"min_interval": 5}
        prepare(fresh_db_url, slack, **options)
        _enqueue(fresh_db_url, n)
        env = env_for(base_env(fresh_db_url, redis_url, source="scrape", scrape_targets="[]"))
        worker, beat = start_worker(env, tmp_path), start_beat(env, tmp_path)
        try:
            wait_until(lambda: len(slack.delivered) >= 2, 300, "two deliveries", (worker, beat),
                       seen=lambda: [r.status for r in slack.requests])
            if where == "between-messages":
                wait_until(lambda: _statuses(fresh_db_url).count("delivered") == 2
                           and "sending" not in _statuses(fresh_db_url), 300,
                           "message 2 recorded as delivered, nothing in flight", (worker, beat),
                           seen=lambda: _statuses(fresh_db_url))
            else:
                slack.delay = 10.0  # the next request is held until the worker is dead
                wait_until(lambda: len(slack.requests) >= 2 and slack.delay and _inflight(slack), 300, "in flight")
            worker.kill()
            slack.delay = 0.0
            worker2 = start_worker(env, tmp_path, name="worker2")
            wait_until(lambda: _settled(fresh_db_url), 300, "the outbox to settle", (worker2, beat))
        finally:
            worker.stop()
            beat.stop()
            if "worker2" in locals():
                worker2.stop()
        titles = [r.json["blocks"][0]["text"]["text"] for r in slack.delivered]
        assert len(titles) == len(set(titles)), f"duplicate delivered: {titles}"
        assert set(titles) == {f"message {i}" for i in range(n)}
        factory = factory_for(fresh_db_url)
        with session_scope(factory) as s:
            doubtful = [m.in_doubt for m in s.scalars(select(OutboxMessage))]
        factory.kw["bind"].dispose()
        assert sum(doubtful) == (1 if where == "request-in-flight" else 0)
        assert_no_secret_in_logs(worker, beat, worker2)


def _inflight(slack: SlowSlack) -> bool:
    return slack._lock.locked()


def _statuses(db_url: str) -> list[str]:
    factory = factory_for(db_url)
    try:
        with session_scope(factory) as s:
            return [m.status for m in s.scalars(select(OutboxMessage).order_by(OutboxMessage.id))]
    finally:
        factory.kw["bind"].dispose()


def _settled(db_url: str) -> bool:
    factory = factory_for(db_url)
    try:
        with session_scope(factory) as s:
            return all(m.status in ("delivered", "failed") for m in s.scalars(select(OutboxMessage)))
    finally:
        factory.kw["bind"].dispose()
