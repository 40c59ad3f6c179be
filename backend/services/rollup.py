"""Storage maintenance: hourly rollups from the dirty-hour queue, daily partitions ahead, retention.

Rollups are exact sums of the raw buckets of an hour (see backend.db.rollups); reads use them only for
clean hours, so this task's lag never changes an answer, only its speed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import replica_repo, request_repo, rollups
from backend.db import repositories as repo


@dataclass
class RollupRun:
    taken: int = 0
    hours: int = 0
    more: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def _raw_cutoff(settings: Settings | None, now: datetime) -> datetime | None:
    if settings is None or settings.raw_retention_days <= 0:
        return None
    day = (now - timedelta(days=settings.raw_retention_days)).astimezone(UTC).date()
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def maintain(session: Session, *, settings: Settings | None = None, now: datetime | None = None) -> RollupRun:
    """One batch of dirty hours that have ended by `now` re-aggregated from the raw buckets (call again while
    `more`); the hour still filling waits until it ends (backend.db.rollups.maintain)."""
    now = now or datetime.now(UTC)
    res = rollups.maintain(session, limit=settings.rollup_batch_hours if settings else 20000,
                           keep_from=_raw_cutoff(settings, now),
                           max_width=max(3600, settings.bucket_seconds if settings else 3600), ended_by=now)
    repo.advance_cursor(session, "rollup", now, now=now)
    return RollupRun(taken=res.taken, hours=res.hours, more=res.more)


@dataclass
class StorageRun:
    created: list[str]
    dropped: list[str]
    rollups_deleted: int
    request_rows_deleted: int = 0
    label_values_deleted: int = 0
    replica_rows_deleted: int = 0
    sender_rows_deleted: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def storage(session: Session, *, settings: Settings, now: datetime) -> StorageRun:
    """Create the daily partitions from yesterday to `partitions_ahead_days` ahead; drop the partitions
    past the raw retention (whole days older than raw_retention_days) and rollups past rollup_retention_days;
    delete per-request rows older than requests_retention_days (label values unseen for that long or for
    requests_label_values_window_seconds, whichever is longer; a sender's model rows unseen for
    requests_models_window_seconds), and replica
    rows older than replica_retention_days (replicas with no row left and unseen since)."""
    today = now.astimezone(UTC).date()
    created = rollups.ensure_partitions(
        session, [today + timedelta(days=i) for i in range(-1, settings.partitions_ahead_days + 1)])
    cutoff = _raw_cutoff(settings, now)
    dropped = rollups.drop_partitions_before(session, cutoff.date()) if cutoff else []
    deleted = 0
    if settings.rollup_retention_days > 0:
        deleted = rollups.delete_rollups_before(session, now - timedelta(days=settings.rollup_retention_days))
    # per-request rows (their bucket sums live in pool_buckets and follow the raw retention above)
    # label values are kept while they count against their window too; a sender's models for their window
    rows, values, senders = request_repo.prune(
        session, before=now - timedelta(days=settings.requests_retention_days),
        values_before=now - timedelta(seconds=max(settings.requests_retention_days * 86400,
                                                  settings.requests_label_values_window_seconds)),
        senders_before=now - timedelta(seconds=settings.requests_models_window_seconds))
    # per-replica rows (their sums are in the pool rows, kept as above)
    replica_rows = replica_repo.prune(session, before=now - timedelta(days=settings.replica_retention_days))
    return StorageRun(created=created, dropped=dropped, rollups_deleted=deleted, request_rows_deleted=rows,
                      label_values_deleted=values, replica_rows_deleted=replica_rows,
                      sender_rows_deleted=senders)
