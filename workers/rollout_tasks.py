"""Rollout tasks: thin, named, JSON-only, acks_late. The stage derivation runs under an advisory lock
(an overlapping run skips, so no gate measurement is counted twice); the digest is idempotent per week
and channel (outbox idempotency key), so beat can ask often and a re-run never sends twice."""

from __future__ import annotations

from celery import shared_task

from backend.db.session import session_scope
from backend.services import report_digest, rollout
from workers import runtime

DELIVER = "specwatch.alerts.deliver"  # workers.alert_tasks.deliver, sent by name
RETRY = runtime.retry_options()


@shared_task(name="specwatch.rollout.evaluate", **RETRY)
def evaluate() -> dict:
    """Derive every model x scope's stage from the trailing window; record measurements and changes."""
    with session_scope(runtime.session_factory()) as session:
        return rollout.evaluate(session, settings=runtime.settings(), now=runtime.utcnow())


@shared_task(name="specwatch.report.weekly_digest", **RETRY)
def weekly_digest() -> dict:
    """Enqueue last week's report to the Slack/webhook channels once the configured day/time has passed;
    delivery goes through the alert outbox sender (triggered by name after the commit)."""
    s = runtime.settings()
    with session_scope(runtime.session_factory()) as session:
        result = report_digest.send_digest(session, settings=s, now=runtime.utcnow())
    if result.get("enqueued"):
        weekly_digest.app.send_task(DELIVER, expires=s.alert_deliver_interval_seconds * 3)
    return result
