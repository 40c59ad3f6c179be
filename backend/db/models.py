"""Tables. The fact table holds additive per-interval increases only: never ratios, so every window and
every traffic-class mix is a sum, then a ratio."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    DateTime,
    Double,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.base import Base
from backend.db.models_columns import (
    BigId,
    FloatArray,
    Instant,
    OptInstant,
    SpecCounts,
    TokenCounts,
    histogram,
)


class Pool(Base):
    """One deployment pool: model x traffic class x spec mode (spec_mode == baseline value: no drafter), per
    source of its counts (`origin`): the engine's counters, or the sums of per-request records of the same
    pool (backend.domain.pool_rows decides which one each row reads)."""

    __tablename__ = "pools"
    __table_args__ = (UniqueConstraint("model_name", "traffic_class", "spec_mode", "origin"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model_name: Mapped[str] = mapped_column(String(300))
    traffic_class: Mapped[str] = mapped_column(String(120))
    spec_mode: Mapped[str] = mapped_column(String(120))
    num_spec_tokens: Mapped[int | None] = mapped_column(SmallInteger)  # K, from the position label count
    drafter: Mapped[str | None] = mapped_column(String(300))
    vllm_version: Mapped[str | None] = mapped_column(String(120))
    first_seen: Mapped[Instant]
    last_seen: Mapped[Instant]  # end of its newest bucket with data
    # engine: counters collected from vLLM; requests: sums of per-request records (POST /requests)
    origin: Mapped[str] = mapped_column(String(16), server_default="engine")
    # the inference engine whose metrics the pool's counts come from (backend.domain.engines)
    engine: Mapped[str] = mapped_column(String(16), server_default="vllm")


class HistogramLayout(Base):
    """A histogram's finite upper bounds (`le`, +Inf implicit). Facts point here instead of repeating them."""

    __tablename__ = "histogram_layouts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bounds: Mapped[list[float]] = mapped_column(FloatArray, unique=True)


class PoolBucket(SpecCounts, histogram("itl"), histogram("tpot"), histogram("ttft"), TokenCounts, Base):
    """Increases of every collected family for one pool over one bucket (bucket_start, bucket_start + width]:
    the spec-decode counters, ITL, TPOT and TTFT histograms, token counts, and the columns below.

    Histogram counts are cumulative per `le` (as Prometheus keeps them), the last element being +Inf.
    A NULL family means "not reported" (e.g. a baseline pool has no spec-decode series), never 0.
    """

    __tablename__ = "pool_buckets"

    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="CASCADE"), primary_key=True)
    bucket_start: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    bucket_seconds: Mapped[int] = mapped_column(Integer)
    accepted_per_pos: Mapped[list[float] | None] = mapped_column(FloatArray)
    running_mean: Mapped[float | None] = mapped_column(Double)  # mean of num_requests_running samples
    restarts: Mapped[int | None] = mapped_column(SmallInteger)  # resets seen in the bucket (scrape source)
    # estimated spec-decode parts (SGLang's gauges, backend.domain.engines.estimate): additive, never exact,
    # never added to drafts / draft_tokens / accepted_tokens; NULL for every exact source
    est_weight_tokens: Mapped[float | None] = mapped_column(Double)
    est_verify_steps: Mapped[float | None] = mapped_column(Double)
    est_accepted_tokens: Mapped[float | None] = mapped_column(Double)
    est_draft_tokens: Mapped[float | None] = mapped_column(Double)

    source: Mapped[str] = mapped_column(String(16))
    collected_at: Mapped[Instant]

    # range-partitioned by day (migration 0004, backend.db.rollups): retention drops whole partitions
    __table_args__ = (Index("ix_pool_buckets_bucket_start", "bucket_start"),
                      {"postgresql_partition_by": "RANGE (bucket_start)"})


class Rejection(Base):
    """Impossible data that was refused (never stored as a fact): one row per pool, bucket and rule."""

    __tablename__ = "rejections"
    __table_args__ = (
        UniqueConstraint("model_name", "traffic_class", "spec_mode", "bucket_start", "rule"),
        Index("ix_rejections_created_at", "created_at"),
    )

    id: Mapped[BigId]
    model_name: Mapped[str] = mapped_column(String(300))
    traffic_class: Mapped[str] = mapped_column(String(120))
    spec_mode: Mapped[str] = mapped_column(String(120))
    bucket_start: Mapped[OptInstant]
    rule: Mapped[str] = mapped_column(String(60))
    detail: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[Instant]


class CollectionRun(Base):
    """One collection cycle or back-fill chunk: what it covered, what it wrote, how it ended."""

    __tablename__ = "collection_runs"
    __table_args__ = (Index("ix_collection_runs_started_at", "started_at"),)

    id: Mapped[BigId]
    kind: Mapped[str] = mapped_column(String(20))  # collect | backfill | scrape
    source: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[Instant]
    finished_at: Mapped[OptInstant]
    status: Mapped[str] = mapped_column(String(16))  # running | ok | failed | abandoned (its process died)
    window_start: Mapped[OptInstant]
    window_end: Mapped[OptInstant]
    pools: Mapped[int] = mapped_column(Integer, default=0)
    rows_written: Mapped[int] = mapped_column(Integer, default=0)
    rejected: Mapped[int] = mapped_column(Integer, default=0)
    requests: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)


class CollectorCursor(Base):
    """End of the newest bucket a source has finalised; a cycle collects from here to the newest complete
    bucket, so a failed cycle leaves a gap that the next one fills."""

    __tablename__ = "collector_cursors"

    name: Mapped[str] = mapped_column(String(60), primary_key=True)
    last_bucket_end: Mapped[Instant]
    updated_at: Mapped[Instant]


class ScrapeLayout(Base):
    """A shape of exposition (its kept series and `_created` series, in order; backend.scrape.layout), stored
    once and shared by every raw scrape of that shape."""

    __tablename__ = "scrape_layouts"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    digest: Mapped[bytes] = mapped_column(LargeBinary, unique=True)  # sha256 of `shape`
    shape: Mapped[str] = mapped_column(Text)  # {"series": [[name, labels]...], "created": [[base, labels]...]}
    last_used: Mapped[Instant]


class RawScrape(Base):
    """Direct-scrape source: one target's kept samples at one instant, in columns (kept until its buckets
    are final): the layout, and the values and `_created` values in its order as little-endian float64."""

    __tablename__ = "raw_scrapes"
    __table_args__ = (Index("ix_raw_scrapes_scraped_at", "scraped_at"),
                      Index("ix_raw_scrapes_layout_id", "layout_id"))

    target: Mapped[str] = mapped_column(String(500), primary_key=True)
    scraped_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    layout_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("scrape_layouts.id"))
    sample_values: Mapped[bytes] = mapped_column(LargeBinary)
    created_values: Mapped[bytes] = mapped_column(LargeBinary)

from backend.db.models_alerts import *
from backend.db.models_config import *
from backend.db.models_perf import *
from backend.db.models_replicas import *
from backend.db.models_requests import *
from backend.db.models_rollout import *
