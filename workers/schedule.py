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


def every(seconds: float):
    """crontab for whole minutes that divide an hour (beat restarts keep the phase), else an interval."""
    if seconds >= 60 and seconds % 60 == 0 and 60 % (seconds // 60) == 0:
        return crontab(minute=f"*/{int(seconds // 60)}")
    return schedule(timedelta(seconds=seconds))


def entry(task: str, period: float) -> dict:
    """A beat entry that expires before the next one is due, so a backlog never runs stale copies."""
    return {"task": task, "schedule": every(period), "options": {"expires": period * 0.9}}


def beat_schedule(s: Settings) -> dict:
    if s.source == "prometheus":
        collector = {"collect-prometheus-metrics": entry(COLLECT, s.collect_interval_seconds)}
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
    }
