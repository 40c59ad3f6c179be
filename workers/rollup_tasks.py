"""Storage and precompute tasks: hourly rollup maintenance, daily partitions/retention, fleet snapshots.
Thin, named, JSON-only, acks_late; all idempotent and safe to overlap (SKIP LOCKED queue, advisory-locked
DDL, snapshots never replaced by older ones)."""

from __future__ import annotations

import time

from celery import shared_task

from backend.db.session import session_scope
from backend.services import fleet, rollup
from workers import runtime

RETRY = runtime.retry_options()


@shared_task(name="specwatch.rollup.maintain", **RETRY)
def maintain() -> dict:
    """Re-aggregate the hours touched since the last run (new buckets, late back-fills), batch after
    batch, each batch one transaction, for at most about one period."""
    s = runtime.settings()
    deadline = time.monotonic() + s.rollup_interval_seconds * 0.8
    total = rollup.RollupRun()
    while True:
        with session_scope(runtime.session_factory()) as session:
            res = rollup.maintain(session, settings=s, now=runtime.utcnow())
        total.taken += res.taken
        total.hours += res.hours
        total.more = res.more
        if not res.more or time.monotonic() > deadline:
            return total.as_dict()


@shared_task(name="specwatch.storage.maintain", **RETRY)
def storage() -> dict:
    """Daily partitions ahead, retention by dropping whole partitions, old rollups deleted."""
    with session_scope(runtime.session_factory()) as session:
        return rollup.storage(session, settings=runtime.settings(), now=runtime.utcnow()).as_dict()


@shared_task(name="specwatch.fleet.snapshot", **RETRY)
def fleet_snapshot() -> dict:
    """Precompute /fleet for the standard windows that are due, ending now (fleet.refresh_period: short
    windows every run, long ones every few minutes; one transaction; re-running only refreshes)."""
    with session_scope(runtime.session_factory()) as session:
        windows = fleet.refresh_snapshots(session, settings=runtime.settings(), now=runtime.utcnow())
    return {"windows": windows}
