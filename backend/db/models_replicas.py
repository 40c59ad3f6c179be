"""Replicas of a pool and their coarse buckets: only the families the replica questions need."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Double, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.base import Base

__all__ = ["Replica", "ReplicaBucket"]

_Floats = ARRAY(Double, dimensions=1)


class Replica(Base):
    """One (instance, engine) of a pool; `labels` are the version labels its target carries, if any."""

    __tablename__ = "replicas"
    __table_args__ = (UniqueConstraint("pool_id", "instance", "engine"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="CASCADE"))
    instance: Mapped[str] = mapped_column(String(300))
    engine: Mapped[str] = mapped_column(String(60))
    labels: Mapped[dict] = mapped_column(JSONB, server_default="{}")
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True))  # end of its newest bucket


class ReplicaBucket(Base):
    """A replica's increases over one coarse bucket (bucket_start, bucket_start + bucket_seconds]:
    spec-decode counters, accepted per position, TPOT and ITL histograms (cumulative per le, +Inf last)."""

    __tablename__ = "replica_buckets"

    replica_id: Mapped[int] = mapped_column(ForeignKey("replicas.id", ondelete="CASCADE"), primary_key=True)
    bucket_start: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    bucket_seconds: Mapped[int] = mapped_column(Integer)
    drafts: Mapped[float | None] = mapped_column(Double)
    draft_tokens: Mapped[float | None] = mapped_column(Double)
    accepted_tokens: Mapped[float | None] = mapped_column(Double)
    accepted_per_pos: Mapped[list[float] | None] = mapped_column(_Floats)
    tpot_layout_id: Mapped[int | None] = mapped_column(ForeignKey("histogram_layouts.id"))
    tpot_buckets: Mapped[list[float] | None] = mapped_column(_Floats)
    tpot_sum: Mapped[float | None] = mapped_column(Double)
    tpot_count: Mapped[float | None] = mapped_column(Double)
    itl_layout_id: Mapped[int | None] = mapped_column(ForeignKey("histogram_layouts.id"))
    itl_buckets: Mapped[list[float] | None] = mapped_column(_Floats)
    itl_sum: Mapped[float | None] = mapped_column(Double)
    itl_count: Mapped[float | None] = mapped_column(Double)
