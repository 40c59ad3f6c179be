"""The Celery application: JSON only, late acks, one task at a time per process, no result backend."""

from __future__ import annotations

from celery import Celery
from celery.signals import celeryd_after_setup, worker_process_init
from kombu import Queue

from backend import blas
from backend.config import get_settings
from workers.schedule import DEFAULT_QUEUE, beat_schedule, queue_names, routes, shard_queue


def transport_options(visibility_timeout: int) -> dict:
    """Redis: an unacked task (its worker died) is handed out again after `visibility_timeout`; sweep for
    such tasks often enough that a short timeout (tests, small periods) really takes effect."""
    return {"visibility_timeout": visibility_timeout,
            "unacked_restore_interval": max(1, min(10, visibility_timeout // 4)),
            "unacked_restore_throttle": 1 if visibility_timeout < 600 else 10}


def make_app() -> Celery:
    s = get_settings()
    app = Celery("specwatch", broker=s.redis_url, include=["workers.tasks", "workers.alert_tasks", "workers.rollout_tasks", "workers.rollup_tasks"])
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_time_limit=s.task_time_limit_seconds,
        task_soft_time_limit=max(1, s.task_time_limit_seconds - 30),
        broker_transport_options=transport_options(s.broker_visibility_timeout_seconds),
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=True,
        timezone="UTC",
        beat_schedule=beat_schedule(s),
        task_default_queue=DEFAULT_QUEUE,
        task_queues=[Queue(name) for name in queue_names()],  # a celery worker started without -Q: all
        task_routes=routes(),
    )
    return app


app = make_app()
blas.single_threaded()  # the worker's main process (the solo pool) and what a prefork pool forks from


@celeryd_after_setup.connect
def _consume_own_shard(instance, **_: object) -> None:
    """A collect worker (one that serves the `collect` queue: the collect group, or every queue) configured
    as collection shard i of n (SPECWATCH_SHARD_INDEX / SPECWATCH_SHARD_COUNT) also consumes that shard's
    queue; beat sends each shard's collect task there, and the task collects the shard of the worker's
    settings (its pools, its cursor). Workers of the other groups never take collection work."""
    s = get_settings()
    if s.source == "prometheus" and s.shard_count > 1 and "collect" in instance.app.amqp.queues.consume_from:
        instance.app.amqp.queues.select_add(shard_queue(s.shard_index, s.shard_count))


@worker_process_init.connect
def _fresh_connections(**_: object) -> None:
    """A forked pool process must not reuse the parent's database connections."""
    from workers import runtime

    runtime.reset()
    blas.single_threaded()
