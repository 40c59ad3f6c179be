"""Per-task queues: every periodic task is sent to its own queue (a real Redis broker), a worker started
without -Q consumes all of them, and a collection shard's explicit queue still wins."""

from __future__ import annotations

import json
import uuid

import redis

from backend.config import Settings
from workers import schedule
from workers.schedule import QUEUES, beat_schedule, queue_names, shard_queue


def _app(monkeypatch, redis_url: str):
    monkeypatch.setenv("SPECWATCH_REDIS_URL", redis_url)
    from workers.celery_app import make_app

    app = make_app()
    # the settings may be cached from an earlier test of this process with another broker: name this one
    app.conf.broker_url = redis_url
    return app


def test_every_periodic_task_lands_in_its_own_queue(monkeypatch, redis_url):
    """On the shared test broker, under a key prefix of its own: other test processes' workers and flushes
    never see or touch these messages."""
    app = _app(monkeypatch, redis_url)
    prefix = f"test-queues-{uuid.uuid4().hex}:"
    app.conf.broker_transport_options = {**(app.conf.broker_transport_options or {}), "global_keyprefix": prefix}
    r = redis.Redis.from_url(redis_url)  # kombu's Redis transport: one list per queue
    try:
        for task in QUEUES:
            app.send_task(task)
        app.send_task("specwatch.metrics.backfill", args=["2026-11-30T00:00:00+00:00"])
        expected = {q: sum(1 for v in QUEUES.values() if v == q) for q in set(QUEUES.values())}
        expected[schedule.DEFAULT_QUEUE] = 1  # the back-fill: no route, the default queue
        assert {q: r.llen(prefix + q) for q in queue_names()} == expected
        # the messages name their tasks: the fleet queue holds exactly the snapshot task
        body = json.loads(r.lindex(prefix + "fleet", 0))
        assert body["headers"]["task"] == schedule.FLEET_SNAPSHOT
    finally:
        keys = list(r.scan_iter(match=prefix + "*"))
        if keys:
            r.delete(*keys)
        app.pool.force_close_all()


def test_routes_name_the_queues_and_a_shard_entry_keeps_its_own(monkeypatch, redis_url):
    app = _app(monkeypatch, redis_url)
    route = app.amqp.router.route
    assert route({}, schedule.FLEET_SNAPSHOT)["queue"].name == "fleet"
    assert route({}, schedule.ALERTS_EVALUATE)["queue"].name == "alerts"
    assert route({}, schedule.ALERTS_DELIVER)["queue"].name == "outbox"
    assert route({}, schedule.ROLLUP_MAINTAIN)["queue"].name == "rollup"
    assert route({}, schedule.ROLLOUT_EVALUATE)["queue"].name == "rollout"
    assert route({}, schedule.COLLECT)["queue"].name == "collect"
    sharded = beat_schedule(Settings(_env_file=None, shard_count=2))
    entry = sharded["collect-prometheus-metrics-shard-1-of-2"]
    assert route(dict(entry["options"]), entry["task"])["queue"].name == shard_queue(1, 2)


def test_a_worker_without_queues_consumes_every_queue(monkeypatch, redis_url):
    app = _app(monkeypatch, redis_url)
    declared = [q.name for q in app.conf.task_queues]
    assert declared == queue_names() == ["celery", "alerts", "collect", "fleet", "outbox", "rollout", "rollup"]
    assert set(QUEUES.values()) <= set(declared)
    # `specwatch worker` passes no -Q unless asked, so it consumes them all
    from backend.cli import run, serve

    calls = []
    monkeypatch.setattr(serve.os, "execvp", lambda exe, args: calls.append(args))
    monkeypatch.setattr(serve, "check_rules_at_start", lambda: None)
    assert run(["worker"]) == 0
    assert calls[-1][-3:] == ["worker", "--loglevel=INFO", "--concurrency=1"]  # no -Q
    assert run(["worker", "--queues", "fleet"]) == 0
    assert calls[-1][-2:] == ["-Q", "fleet"]
