"""Per-task queues and worker groups: every task is sent to its own queue (a real Redis broker), every
registered task has a route into exactly one group, `specwatch worker` runs one worker per group and
`--queues GROUP` one group, and a collection shard's explicit queue still wins."""

from __future__ import annotations

import json
import sys
import uuid

import redis

from backend.config import Settings
from workers import schedule
from workers.schedule import GROUPS, QUEUES, beat_schedule, group_of, queue_names, resolve_queues, shard_queue


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
        app.send_task("specwatch.adhoc.unknown")
        expected = {q: sum(1 for v in QUEUES.values() if v == q) for q in set(QUEUES.values())}
        expected[schedule.DEFAULT_QUEUE] = 1  # a task with no route: the default queue (the compute group)
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
    assert route({}, schedule.SCRAPE)["queue"].name == "collect"
    assert route({}, schedule.BACKFILL)["queue"].name == "backfill"
    assert route({}, schedule.REPORT_DIGEST)["queue"].name == "reports"
    sharded = beat_schedule(Settings(_env_file=None, shard_count=2))
    entry = sharded["collect-prometheus-metrics-shard-1-of-2"]
    assert route(dict(entry["options"]), entry["task"])["queue"].name == shard_queue(1, 2)


def test_every_registered_task_is_routed_into_exactly_one_group(monkeypatch, redis_url):
    app = _app(monkeypatch, redis_url)
    app.loader.import_default_modules()
    ours = sorted(name for name in app.tasks if not name.startswith("celery."))
    assert ours and all(name.startswith("specwatch.") for name in ours)
    assert sorted(QUEUES) == ours  # a route for every task, none for a task that does not exist
    declared = [q.name for q in app.conf.task_queues]
    assert declared == queue_names() == ["celery", "alerts", "backfill", "collect", "fleet", "outbox", "reports",
                                         "rollout", "rollup"]
    # the groups split the declared queues: each queue served by exactly one group
    grouped = [q for queues in GROUPS.values() for q in queues]
    assert sorted(grouped) == sorted(declared) and len(grouped) == len(set(grouped))
    assert {task: group_of(q) for task, q in QUEUES.items()} == {
        "specwatch.metrics.collect": "collect", "specwatch.metrics.scrape": "collect",
        "specwatch.metrics.backfill": "collect",
        "specwatch.rollup.maintain": "compute", "specwatch.storage.maintain": "compute",
        "specwatch.fleet.snapshot": "compute", "specwatch.alerts.evaluate": "compute",
        "specwatch.rollout.evaluate": "compute",
        "specwatch.alerts.deliver": "deliver",
        "specwatch.report.weekly_digest": "reports"}
    assert group_of(shard_queue(1, 4)) == "collect"
    # every task beat schedules is one of them, whatever the source
    for s in (Settings(_env_file=None), Settings(_env_file=None, source="scrape"),
              Settings(_env_file=None, shard_count=3)):
        assert {e["task"] for e in beat_schedule(s).values()} <= set(QUEUES)


def test_queues_option_takes_groups_and_queues():
    assert resolve_queues("collect") == ["collect", "backfill"]
    assert resolve_queues("deliver, reports") == ["outbox", "reports"]
    assert resolve_queues("alerts,compute") == ["alerts", "rollup", "fleet", "rollout", "celery"]
    assert resolve_queues(shard_queue(0, 2)) == [shard_queue(0, 2)]
    for bad in ("nope", "collect,nope", ",", "Collect"):
        try:
            resolve_queues(bad)
        except ValueError as exc:
            assert "groups collect, compute, deliver, reports" in str(exc)
        else:
            raise AssertionError(f"{bad!r} accepted")


def test_specwatch_worker_runs_one_process_per_group_and_queues_runs_one(monkeypatch, capsys):
    from backend.cli import run, serve, supervise

    execs, supervised = [], []
    monkeypatch.setattr(serve.os, "execvp", lambda exe, args: execs.append(args))
    monkeypatch.setattr(serve, "check_rules_at_start", lambda: None)
    monkeypatch.setattr(supervise, "supervise", lambda children, **kw: supervised.append((children, kw)) or 0)
    assert run(["worker"]) == 0
    children, kw = supervised[-1]
    assert not execs and kw == {"stop_timeout": 30.0}
    assert [(c.name, c.args[c.args.index("-Q") + 1], c.args[c.args.index("-n") + 1]) for c in children] == [
        ("collect", "collect,backfill", "collect@%h"),
        ("compute", "rollup,fleet,alerts,rollout,celery", "compute@%h"),
        ("deliver", "outbox", "deliver@%h"),
        ("reports", "reports", "reports@%h")]
    assert all(c.args[1:6] == ["-m", "celery", "-A", "workers.celery_app", "worker"] for c in children)
    assert run(["worker", "--queues", "collect"]) == 0
    assert execs[-1][-2:] == ["-Q", "collect,backfill"]  # celery's own node name: celery@HOST
    assert run(["worker", "--queues", "deliver", "--name", "deliver@%h", "--concurrency", "2"]) == 0
    assert execs[-1][-5:] == ["--concurrency=2", "-Q", "outbox", "-n", "deliver@%h"]
    assert run(["worker", "--queues", "fleet"]) == 0
    assert execs[-1][-2:] == ["-Q", "fleet"]
    capsys.readouterr()
    assert run(["worker", "--queues", "collect,scrapes"]) == 2
    assert "unknown queue or group 'scrapes'" in capsys.readouterr().err
    assert len(execs) == 3 and len(supervised) == 1


def test_only_a_collect_worker_takes_its_collection_shards_queue(redis_url, tmp_path):
    """Real workers started as `specwatch worker --queues GROUP`, configured as shard 1 of 2: the collect
    worker consumes the shard's queue, the deliver worker does not (its banner lists what it consumes)."""
    from tests.support.procs import Proc
    from tests.support.stack import ROOT, env_for, wait_until

    env = env_for({"redis_url": redis_url, "shard_count": 2, "shard_index": 1,
                   "alert_rules_file": "/nonexistent/rules.yaml"})
    procs = {group: Proc(group, [sys.executable, "-m", "backend.cli", "worker", "--queues", group, "--name",
                                 f"{group}-{uuid.uuid4().hex[:6]}@%h"], tmp_path / f"{group}.log", env=env,
                         cwd=ROOT).start() for group in ("collect", "deliver")}
    try:
        for p in procs.values():
            wait_until(lambda p=p: " ready." in p.tail(200), 300, f"the {p.name} worker to be ready", (p,))
        banners = {g: p.log_path.read_text() for g, p in procs.items()}
    finally:
        for p in procs.values():
            p.stop()
    consumed = {g: {line.split()[1] for line in text.splitlines() if line.strip().startswith(".> ")
                    and "exchange=" in line} for g, text in banners.items()}
    assert consumed == {"collect": {"collect", "backfill", shard_queue(1, 2)}, "deliver": {"outbox"}}
