"""Alert tasks: thin, named, JSON-only, idempotent (the evaluation is a state machine behind an advisory
lock; delivery claims per channel under a lock), acks_late. The work lives in backend.services."""

from __future__ import annotations

from celery import shared_task

from backend.db.session import session_scope
from backend.services import alerts, dispatch
from workers import runtime

EVALUATE = "specwatch.alerts.evaluate"
DELIVER = "specwatch.alerts.deliver"
RETRY = runtime.retry_options()


@shared_task(name=EVALUATE, **RETRY)
def evaluate() -> dict:
    """Evaluate every rule once; transitions and their outbox rows commit together. Delivery is
    triggered after the commit (beat's deliver entry is the safety net)."""
    with session_scope(runtime.session_factory()) as session:
        result = alerts.evaluate(session, settings=runtime.settings(), now=runtime.utcnow())
    if result.get("notifications"):
        deliver.apply_async(expires=runtime.settings().alert_deliver_interval_seconds * 3)
    return result


@shared_task(name=DELIVER, **RETRY)
def deliver() -> dict:
    """Send every due outbox message (paced per channel) for at most alert_deliver_max_run_seconds."""
    return dispatch.deliver_due(runtime.session_factory(), runtime.settings())
