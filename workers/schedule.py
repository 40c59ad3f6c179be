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


def every(seconds: float):
    """crontab for whole minutes that divide an hour (beat restarts keep the phase), else an interval."""
    if seconds >= 60 and seconds % 60 == 0 and 60 % (seconds // 60) == 0:
        return crontab(minute=f"*/{int(seconds // 60)}")
    return schedule(timedelta(seconds=seconds))


def beat_schedule(s: Settings) -> dict:
    if s.source == "prometheus":
        name, task, period = "collect-prometheus-metrics", COLLECT, s.collect_interval_seconds
    else:
        name, task, period = "scrape-vllm-metrics", SCRAPE, s.scrape_interval_seconds
    entries = {name: {"task": task, "schedule": every(period), "options": {"expires": period * 0.9}}}
    entries["evaluate-alert-rules"] = {"task": ALERTS_EVALUATE, "schedule": every(s.alert_eval_interval_seconds),
                                       "options": {"expires": s.alert_eval_interval_seconds * 0.9}}
    entries["deliver-alert-outbox"] = {"task": ALERTS_DELIVER, "schedule": every(s.alert_deliver_interval_seconds),
                                       "options": {"expires": s.alert_deliver_interval_seconds * 0.9}}
    entries["derive-rollout-stages"] = {"task": ROLLOUT_EVALUATE, "schedule": every(s.rollout_eval_interval_seconds),
                                        "options": {"expires": s.rollout_eval_interval_seconds * 0.9}}
    entries["send-weekly-digest"] = {"task": REPORT_DIGEST, "schedule": every(s.digest_check_interval_seconds),
                                     "options": {"expires": s.digest_check_interval_seconds * 0.9}}
    return entries
