"""The one beat schedule: entry name -> task name, period, and `expires` below the period."""

from __future__ import annotations

from datetime import timedelta

from celery.schedules import crontab, schedule

from backend.config import Settings

COLLECT = "specwatch.metrics.collect"
SCRAPE = "specwatch.metrics.scrape"
ALERTS_EVALUATE = "specwatch.alerts.evaluate"
ALERTS_DELIVER = "specwatch.alerts.deliver"
ROLLOUT_EVALUATE = "specwatch.rollout.evaluate"
REPORT_DIGEST = "specwatch.report.weekly_digest"
ROLLUP_MAINTAIN = "specwatch.rollup.maintain"
STORAGE_MAINTAIN = "specwatch.storage.maintain"
FLEET_SNAPSHOT = "specwatch.fleet.snapshot"

BACKFILL = "specwatch.metrics.backfill"

DEFAULT_QUEUE = "celery"
# every task's own queue (a worker started with `-Q fleet`, for instance, serves only that task); see
# docs/scale.md. Every task is routed: tests/workers/test_queues.py checks each registered task is here.
QUEUES = {
    COLLECT: "collect", SCRAPE: "collect", BACKFILL: "backfill",
    ROLLUP_MAINTAIN: "rollup", STORAGE_MAINTAIN: "rollup",
    FLEET_SNAPSHOT: "fleet",
    ALERTS_EVALUATE: "alerts", ROLLOUT_EVALUATE: "rollout",
    ALERTS_DELIVER: "outbox",
    REPORT_DIGEST: "reports",
}

# The worker groups: the queues one worker process serves. `specwatch worker` runs one process per group,
# `specwatch worker --queues GROUP` one group (one Deployment per group on Kubernetes). Collection shares
# its process with nothing that waits on the outside world or computes for long: a scrape that starts late
# puts its counts in a later minute, so nothing may hold up the collect process.
#   collect  collection: Prometheus collect, direct scrape (its cadence is the data), back-fills; a
#            collection shard's queue joins it (workers.celery_app)
#   compute  work on stored data only: rollups, retention, fleet snapshots, alert evaluation, rollout
#            derivation, ad-hoc tasks. A late evaluation fires later but reads the same stored minutes
#            (its `for` runs on its own clock), so it may wait behind a snapshot; it never waits for a
#            receiver (deliver) nor delays a scrape (collect)
#   deliver  the outbox: Slack, webhooks, Alertmanager (a receiver may take its whole timeout)
#   reports  the weekly digest (renders a week of data; its messages go out through deliver)
GROUPS: dict[str, tuple[str, ...]] = {
    "collect": ("collect", "backfill"),
    "compute": ("rollup", "fleet", "alerts", "rollout", DEFAULT_QUEUE),
    "deliver": ("outbox",),
    "reports": ("reports",),
}


def queue_names() -> list[str]:
    """Every queue the app declares: the default queue (ad-hoc tasks) and the tasks' queues (the
    collection shards' queues are added by the shard workers themselves)."""
    return [DEFAULT_QUEUE, *sorted(set(QUEUES.values()))]


def group_of(queue: str) -> str:
    """The group whose worker serves `queue` (a collection shard's queue: collect)."""
    if queue.startswith("collect.shard-"):
        return "collect"
    for group, queues in GROUPS.items():
        if queue in queues:
            return group
    raise KeyError(queue)


def resolve_queues(spec: str) -> list[str]:
    """`--queues` as given (comma-separated group or queue names; a group stands for its queues) -> the
    queue names, in order, each once. Unknown names raise ValueError naming the known ones."""
    known = set(queue_names())
    out: list[str] = []
    for raw in spec.split(","):
        name = raw.strip()
        if not name:
            continue
        if name in GROUPS:
            names = list(GROUPS[name])
        elif name in known or name.startswith("collect.shard-"):
            names = [name]
        else:
            raise ValueError(f"unknown queue or group {name!r}: groups {', '.join(GROUPS)}; "
                             f"queues {', '.join(queue_names())}")
        out.extend(n for n in names if n not in out)
    if not out:
        raise ValueError(f"no queue named: give groups {', '.join(GROUPS)} or queue names")
    return out


def routes() -> dict[str, dict[str, str]]:
    """task name -> its queue (an explicit queue, as beat gives a collection shard's entries, wins)."""
    return {task: {"queue": queue} for task, queue in QUEUES.items()}


def every(seconds: float):
    """crontab for whole minutes that divide an hour (beat restarts keep the phase), else an interval."""
    if seconds >= 60 and seconds % 60 == 0 and 60 % (seconds // 60) == 0:
        return crontab(minute=f"*/{int(seconds // 60)}")
    return schedule(timedelta(seconds=seconds))


def entry(task: str, period: float, queue: str | None = None) -> dict:
    """A beat entry that expires before the next one is due, so a backlog never runs stale copies."""
    options: dict = {"expires": period * 0.9}
    if queue is not None:
        options["queue"] = queue
    return {"task": task, "schedule": every(period), "options": options}


def shard_queue(index: int, count: int) -> str:
    """The queue of one Prometheus collection shard: only the workers configured as that shard consume it."""
    return f"collect.shard-{index}-of-{count}"


def collect_entries(s: Settings) -> dict:
    """Unsharded: one collect entry on the default queue. Sharded (SPECWATCH_SHARD_COUNT = n > 1): one entry
    per shard, each sent to its shard's queue, so every shard collects once per period, by its own worker."""
    if s.shard_count <= 1:
        return {"collect-prometheus-metrics": entry(COLLECT, s.collect_interval_seconds)}
    return {f"collect-prometheus-metrics-shard-{i}-of-{s.shard_count}":
            entry(COLLECT, s.collect_interval_seconds, shard_queue(i, s.shard_count)) for i in range(s.shard_count)}


def beat_schedule(s: Settings) -> dict:
    if s.source == "prometheus":
        collector = collect_entries(s)
    else:
        collector = {"scrape-vllm-metrics": entry(SCRAPE, s.scrape_interval_seconds)}
    return {
        **collector,
        "evaluate-alert-rules": entry(ALERTS_EVALUATE, s.alert_eval_interval_seconds),
        "deliver-alert-outbox": entry(ALERTS_DELIVER, s.alert_deliver_interval_seconds),
        "derive-rollout-stages": entry(ROLLOUT_EVALUATE, s.rollout_eval_interval_seconds),
        "send-weekly-digest": entry(REPORT_DIGEST, s.digest_check_interval_seconds),
        "maintain-hourly-rollups": entry(ROLLUP_MAINTAIN, s.rollup_interval_seconds),
        "maintain-partitions": entry(STORAGE_MAINTAIN, s.storage_interval_seconds),
        "snapshot-fleet-overview": entry(FLEET_SNAPSHOT, s.fleet_snapshot_interval_seconds),
    }
