"""The one beat schedule and the Celery settings every task relies on."""

from __future__ import annotations

import pytest
from celery.schedules import crontab, schedule

from backend.config import Settings
from workers.schedule import beat_schedule, every


def period_of(s) -> float:
    if isinstance(s, crontab):
        minutes = sorted(s.minute)
        return 60.0 * (minutes[1] - minutes[0] if len(minutes) > 1 else 60)
    assert isinstance(s, schedule)
    return s.run_every.total_seconds()


@pytest.fixture(scope="module")
def app():
    from workers.celery_app import app

    app.loader.import_default_modules()
    return app


@pytest.mark.parametrize("source", ["prometheus", "scrape"])
@pytest.mark.parametrize("interval", [2, 15, 60, 300])
def test_every_entry_is_registered_and_expires_before_its_next_run(app, source, interval):
    s = Settings(_env_file=None, source=source, collect_interval_seconds=interval, scrape_interval_seconds=interval)
    entries = beat_schedule(s)
    collector = "collect-prometheus-metrics" if source == "prometheus" else "scrape-vllm-metrics"
    assert collector in entries
    assert ("scrape-vllm-metrics" if source == "prometheus" else "collect-prometheus-metrics") not in entries
    for name, entry in entries.items():
        assert entry["task"] in app.tasks, name
        assert 0 < entry["options"]["expires"] < period_of(entry["schedule"]), name
    assert period_of(entries[collector]["schedule"]) == interval


def test_whole_minutes_use_crontab_so_a_beat_restart_keeps_the_phase():
    assert isinstance(every(60), crontab) and isinstance(every(300), crontab)
    assert isinstance(every(15), schedule) and isinstance(every(420), schedule)  # 7 min does not divide an hour


def test_tasks_are_json_late_acked_and_named(app):
    assert app.conf.task_serializer == "json" and app.conf.accept_content == ["json"]
    assert app.conf.task_acks_late and app.conf.task_reject_on_worker_lost
    assert app.conf.worker_prefetch_multiplier == 1
    ours = [t for name, t in app.tasks.items() if name.startswith("specwatch.")]
    assert len(ours) >= 5
    for task in ours:
        assert task.acks_late, task.name
        assert task.name.count(".") == 2, task.name
