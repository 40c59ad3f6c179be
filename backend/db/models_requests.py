"""Per-request acceptance tables (imported at the end of models.py so Alembic sees them).

`request_records` keeps one row per request posted to POST /requests (vLLM's per-request
`metrics.speculative_decoding` counts, or llama.cpp's / SGLang's per-response counts, NULL where the engine
reports none; the caller's allowlisted labels), for
`requests_retention_days`; idempotency is its primary key. The additive sums per bucket go into
`pool_buckets` of a pool with `origin = 'requests'` (model x traffic class x the serving engine's spec mode), so every
analytic that reads pools reads them. `request_label_values` holds the distinct values seen per label: the
cardinality limit counts them. `request_model_senders` holds which models each sender (an ingest token, or a proxy's
user) posted and when last: the cap on distinct models per sender and window counts them. `request_pool_engines`
holds the kind of record a records pool holds (its engine, and whether they report draft tokens): one kind per
pool, so no sum mixes reported and missing counts."""

from __future__ import annotations

from sqlalchemy import Boolean, CheckConstraint, Index, Integer, SmallInteger, String, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.base import Base
from backend.db.models_columns import Instant

__all__ = ["RequestLabelValue", "RequestModelSender", "RequestPoolEngine", "RequestRecordRow"]

ENGINE_CHECK = "engine IN ('vllm', 'llamacpp', 'sglang')"  # backend.domain.per_request.ENGINES


class RequestRecordRow(Base):
    __tablename__ = "request_records"
    __table_args__ = (Index("ix_request_records_pool_finish", "pool_id", "finish_time"),
                      Index("ix_request_records_finish_brin", "finish_time", postgresql_using="brin"),
                      CheckConstraint(ENGINE_CHECK, name="engine"))

    request_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    # a pool's id, without a foreign key (a per-row lookup on a 20k rows/s path): rows are written only with
    # the ids of pools upserted in the same transaction; a trigger on pools deletes a deleted pool's rows
    pool_id: Mapped[int] = mapped_column(Integer)
    finish_time: Mapped[Instant]
    labels: Mapped[dict] = mapped_column(JSONB)
    output_tokens: Mapped[int] = mapped_column(Integer)
    # NULL where the record's engine does not report the count (llama.cpp: K, steps, histogram; SGLang: draft
    # tokens on older servers, histogram)
    num_spec_tokens: Mapped[int | None] = mapped_column(SmallInteger)
    steps: Mapped[int | None] = mapped_column(Integer)
    draft_tokens: Mapped[int | None] = mapped_column(Integer)
    accepted: Mapped[int] = mapped_column(Integer)
    histogram: Mapped[list[int] | None] = mapped_column(ARRAY(Integer, dimensions=1))
    received_at: Mapped[Instant]
    replica: Mapped[str | None] = mapped_column(String(200))  # the engine replica that served it, if the caller knows
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)  # context length (usage.prompt_tokens), if sent
    # the engine's running requests (vllm:num_requests_running) when it finished, if the caller knows
    running_requests: Mapped[int | None] = mapped_column(Integer)
    engine: Mapped[str] = mapped_column(String(16), server_default=text("'vllm'"))  # whose counts: vllm | llamacpp | sglang


class RequestPoolEngine(Base):
    __tablename__ = "request_pool_engines"
    __table_args__ = (CheckConstraint(ENGINE_CHECK, name="engine"),)

    pool_id: Mapped[int] = mapped_column(Integer, primary_key=True)  # a records pool (origin 'requests')
    engine: Mapped[str] = mapped_column(String(16))
    draft_tokens: Mapped[bool] = mapped_column(Boolean)  # its records report draft tokens (SGLang's may not)


class RequestLabelValue(Base):
    __tablename__ = "request_label_values"

    label: Mapped[str] = mapped_column(String(60), primary_key=True)
    value: Mapped[str] = mapped_column(String(200), primary_key=True)
    first_seen: Mapped[Instant]
    last_seen: Mapped[Instant]  # retention forgets unused values


class RequestModelSender(Base):
    __tablename__ = "request_model_senders"

    sender: Mapped[str] = mapped_column(String(220), primary_key=True)  # token:<id> or user:<name>
    model_name: Mapped[str] = mapped_column(String(300), primary_key=True)
    first_seen: Mapped[Instant]
    last_seen: Mapped[Instant]  # the window counts from here
