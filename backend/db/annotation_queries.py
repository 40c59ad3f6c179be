"""Chart annotations for one model: buckets in which a pool's counters restarted (`pool_buckets.restarts`,
filled from raw samples, by direct scrape or through Prometheus), and the drafter / vLLM version each pool currently reports."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db.models import Pool, PoolBucket


@dataclass(frozen=True)
class RestartRow:
    bucket_start: datetime
    bucket_seconds: int
    traffic_class: str
    spec_mode: str
    restarts: int


def restarts(session: Session, *, model_name: str, start: datetime, end: datetime, limit: int = 500) -> list[RestartRow]:
    """Buckets with at least one counter reset, oldest first (at most `limit`)."""
    stmt = (select(PoolBucket.bucket_start, PoolBucket.bucket_seconds, Pool.traffic_class, Pool.spec_mode,
                   PoolBucket.restarts)
            .join(Pool, Pool.id == PoolBucket.pool_id)
            .where(Pool.model_name == model_name, PoolBucket.bucket_start >= start, PoolBucket.bucket_start < end,
                   PoolBucket.restarts > 0)
            .order_by(PoolBucket.bucket_start).limit(limit))
    return [RestartRow(*row) for row in session.execute(stmt).all()]


def model_pools(session: Session, *, model_name: str) -> list[Pool]:
    return list(session.scalars(select(Pool).where(Pool.model_name == model_name)
                                .order_by(Pool.traffic_class, Pool.spec_mode)))
