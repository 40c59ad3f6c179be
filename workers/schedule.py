"""The one beat schedule: entry name -> task name, period, and `expires` below the period."""

from __future__ import annotations

from datetime import timedelta

from celery.schedules import crontab, schedule

from backend.config import Settings
from backend.queues import DEFAULT_QUEUE, GROUPS, group_of, queue_names, resolve_queues, shard_queue

__all__ = ["DEFAULT_QUEUE", "GROUPS", "QUEUES", "beat_schedule", "group_of", "queue_names", "resolve_queues", "routes",
           "shard_queue"]

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

# every task's own queue (a worker started with `-Q fleet`, for instance, serves only that task), each queue
# in one worker group (backend.queues.GROUPS); see docs/scale.md. Every task is routed:
# tests/workers/test_queues.py checks each registered task is here.
QUEUES = {
    COLLECT: "collect", SCRAPE: "collect", BACKFILL: "backfill",
    ROLLUP_MAINTAIN: "rollup", STORAGE_MAINTAIN: "rollup",
    FLEET_SNAPSHOT: "fleet",
    ALERTS_EVALUATE: "alerts", ROLLOUT_EVALUATE: "rollout",
    ALERTS_DELIVER: "outbox",
    REPORT_DIGEST: "reports",
}


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
