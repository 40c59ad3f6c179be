"""The buckets an A/B comparison reads: every family it needs, per pool and bucket, over a window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db.models import PoolBucket

MAX_ROWS = 2_000_000  # a week of 1-minute buckets is 10,080 per pool


@dataclass(frozen=True)
class BucketRow:
    pool_id: int
    bucket_start: datetime
    bucket_seconds: int
    running_mean: float | None
    drafts: float | None
    draft_tokens: float | None
    accepted: float | None
    per_pos: list[float] | None
    tpot_sum: float | None
    tpot_count: float | None
    generation_tokens: float | None
    itl_layout_id: int | None
    itl_buckets: list[float] | None
    tpot_layout_id: int | None
    tpot_buckets: list[float] | None


def buckets(session: Session, *, pool_ids: Sequence[int], start: datetime, end: datetime) -> list[BucketRow]:
    """Buckets of the pools with start <= bucket_start < end, in time order (at most MAX_ROWS)."""
    if not pool_ids:
        return []
    b = PoolBucket
    stmt = (select(b.pool_id, b.bucket_start, b.bucket_seconds, b.running_mean, b.drafts, b.draft_tokens,
                   b.accepted_tokens, b.accepted_per_pos, b.tpot_sum, b.tpot_count, b.generation_tokens,
                   b.itl_layout_id, b.itl_buckets, b.tpot_layout_id, b.tpot_buckets)
            .where(b.pool_id.in_(list(pool_ids)), b.bucket_start >= start, b.bucket_start < end)
            .order_by(b.bucket_start, b.pool_id).limit(MAX_ROWS))
    return [BucketRow(*r) for r in session.execute(stmt).all()]
