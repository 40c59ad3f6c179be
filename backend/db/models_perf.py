"""Performance tables (imported at the end of models.py so Alembic sees them).

`pool_buckets` itself is range-partitioned by day on bucket_start (migration 0004; partitions
`pool_buckets_pYYYYMMDD` are created ahead by the storage task and dropped by retention; env.py keeps them
out of autogenerate). `pool_buckets_hourly` holds the same additive sums per pool and hour (the raw buckets
whose END falls in (hour_start, hour_start + 1 h]), split by concurrency band and histogram layouts so every
read that groups by them can sum hours instead of minutes. `rollup_dirty` is the queue of (pool, hour)
touched since the rollup task last ran, filled in the writing transaction by statement triggers on
pool_buckets (any writer, any late back-fill)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Double, ForeignKey, Index, Integer, LargeBinary, SmallInteger
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.base import Base
from backend.db.models_columns import FloatArray, Instant, SpecCounts, TokenCounts, histogram

__all__ = ["FleetSnapshot", "PoolBucketHourly", "PoolSpecDaily", "PoolSpecHourly", "RollupDirty"]

NO_BAND = -1  # band of buckets without running requests reported
NO_LAYOUT = 0  # layout id of a histogram family not reported


_HOURLY_HISTOGRAMS = tuple(histogram(f, layout=False) for f in ("itl", "tpot", "ttft"))  # layouts: the key


class PoolBucketHourly(SpecCounts, *_HOURLY_HISTOGRAMS, TokenCounts, Base):
    __tablename__ = "pool_buckets_hourly"
    __table_args__ = (Index("ix_pool_buckets_hourly_hour_start", "hour_start"),)

    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="CASCADE"), primary_key=True)
    hour_start: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    band: Mapped[int] = mapped_column(SmallInteger, primary_key=True)  # domain.bands index, NO_BAND
    itl_layout_id: Mapped[int] = mapped_column(Integer, primary_key=True)  # NO_LAYOUT = family absent
    tpot_layout_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ttft_layout_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    buckets: Mapped[int] = mapped_column(Integer)

    drafts_pp: Mapped[float | None] = mapped_column(Double)  # drafts of the buckets with per-position data
    accepted_per_pos: Mapped[list[float] | None] = mapped_column(FloatArray)
    pp_len: Mapped[int | None] = mapped_column(SmallInteger)  # longest per-position array summed
    running_sum: Mapped[float | None] = mapped_column(Double)  # sum of the buckets' running_mean
    running_n: Mapped[int] = mapped_column(Integer)  # buckets with running_mean
    restarts: Mapped[int | None] = mapped_column(Integer)
    last_end: Mapped[int] = mapped_column(BigInteger)  # unix seconds: end of the newest bucket summed


class PoolSpecHourly(SpecCounts, Base):
    """Acceptance series' source: per pool and hour, the spec counters summed over the hour and, packed as
    big-endian float64 (`float8send`, 8 bytes per slot), per bucket (slot j: the bucket ending at
    hour_start + (j + 1) * bucket_seconds, NaN where there is no bucket or no value). bucket_seconds 0: no
    per-bucket columns (mixed or unaligned widths, or an hour rolled up before this table existed whose
    raw buckets are gone)."""

    __tablename__ = "pool_spec_hourly"
    __table_args__ = (Index("ix_pool_spec_hourly_hour_start", "hour_start"),
                      Index("ix_pool_spec_hourly_totals", "pool_id", "hour_start",
                            postgresql_include=["drafts", "draft_tokens", "accepted_tokens", "bucket_seconds"]))

    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="CASCADE"), primary_key=True)
    hour_start: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    bucket_seconds: Mapped[int] = mapped_column(Integer)
    drafts_at: Mapped[bytes | None] = mapped_column(LargeBinary)
    draft_tokens_at: Mapped[bytes | None] = mapped_column(LargeBinary)
    accepted_at: Mapped[bytes | None] = mapped_column(LargeBinary)


class PoolSpecDaily(Base):
    """pool_spec_hourly per pool and UTC day, packed. The *_h columns (migration 0008) hold 24 big-endian
    float64 slots, slot j the total of the hour starting at day_start + j h (NaN: no hour row or no value).
    The *_at columns (migration 0010, STORAGE EXTERNAL) hold the day's hour rows' per-bucket columns back to
    back, 86400 / bucket_seconds slots (NaN: no hour row or no value; NULL: no hour has the counter);
    bucket_seconds is 0 when the hours' widths differ or one has no per-bucket columns. Rebuilt by the
    rollup task with the day's hours; reads take whole clean days from it."""

    __tablename__ = "pool_spec_daily"
    __table_args__ = (Index("ix_pool_spec_daily_day_start", "day_start"),)

    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="CASCADE"), primary_key=True)
    day_start: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    drafts_h: Mapped[bytes] = mapped_column(LargeBinary)
    draft_tokens_h: Mapped[bytes] = mapped_column(LargeBinary)
    accepted_h: Mapped[bytes] = mapped_column(LargeBinary)
    bucket_seconds: Mapped[int] = mapped_column(Integer, server_default="0")
    drafts_at: Mapped[bytes | None] = mapped_column(LargeBinary)
    draft_tokens_at: Mapped[bytes | None] = mapped_column(LargeBinary)
    accepted_at: Mapped[bytes | None] = mapped_column(LargeBinary)


class RollupDirty(Base):
    __tablename__ = "rollup_dirty"

    pool_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    hour_start: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)


class FleetSnapshot(Base):
    """The /fleet JSON body per standard window length, precomputed by the snapshot task."""

    __tablename__ = "fleet_snapshots"

    window_seconds: Mapped[int] = mapped_column(Integer, primary_key=True)
    generated_at: Mapped[Instant]
    body: Mapped[bytes] = mapped_column(LargeBinary)
