"""The alert beat entries: registered task names, `expires` below the period."""

from __future__ import annotations

from backend.config import Settings
from workers.schedule import beat_schedule


def test_alert_entries_registered_and_expire_before_next_run():
    from workers.celery_app import app

    app.loader.import_default_modules()
    s = Settings(_env_file=None, alert_eval_interval_seconds=30, alert_deliver_interval_seconds=5)
    entries = beat_schedule(s)
    for name, period in (("evaluate-alert-rules", 30), ("deliver-alert-outbox", 5)):
        entry = entries[name]
        assert entry["task"] in app.tasks
        assert entry["options"]["expires"] < period
    assert app.tasks["specwatch.alerts.deliver"].acks_late
