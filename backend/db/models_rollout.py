"""Rollout tables: one tracked state machine per model x scope (a traffic class, or `mixed` = the
production mix), every gate measurement (history beyond Argo's default 10), the audit log of stage
changes and operator decisions, and frozen baseline snapshots. Imported at the end of models.py so
Alembic sees them."""

from __future__ import annotations

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.base import Base
from backend.db.models_columns import Instant, LogRow, OptInstant

__all__ = ["BaselineSnapshot", "RolloutEvent", "RolloutMeasurement", "RolloutTrack"]


class RolloutTrack(Base):
    """Where one model x scope stands in the 5-step recipe, and the gate counters of its current run."""

    __tablename__ = "rollout_tracks"
    __table_args__ = (UniqueConstraint("model_name", "scope"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model_name: Mapped[str] = mapped_column(String(300))
    scope: Mapped[str] = mapped_column(String(120))  # a traffic class, or "mixed"
    spec_mode: Mapped[str | None] = mapped_column(String(120))  # the candidate drafter (busiest spec mode)
    stage: Mapped[str] = mapped_column(String(40))
    stage_since: Mapped[Instant]
    manual: Mapped[bool] = mapped_column(Boolean, default=False)  # an operator set the stage; derivation waits
    gate_phase: Mapped[str] = mapped_column(String(16))  # idle | running | passed | failed | error | inconclusive
    gate_result: Mapped[str | None] = mapped_column(String(16))  # last measurement: pass|fail|inconclusive|error
    latency_result: Mapped[str | None] = mapped_column(String(16))
    successes_in_row: Mapped[int] = mapped_column(Integer, default=0)
    failures_total: Mapped[int] = mapped_column(Integer, default=0)
    errors_in_row: Mapped[int] = mapped_column(Integer, default=0)
    inconclusive_total: Mapped[int] = mapped_column(Integer, default=0)
    measurements: Mapped[int] = mapped_column(Integer, default=0)
    reason: Mapped[str] = mapped_column(Text, default="")
    last_eval_at: Mapped[OptInstant]
    last_values: Mapped[dict | None] = mapped_column(JSONB)
    created_at: Mapped[Instant]


class RolloutMeasurement(LogRow, Base):
    """One gate evaluation of one track (kept indefinitely; the numbers that went into it)."""

    __tablename__ = "rollout_measurements"
    __table_args__ = (Index("ix_rollout_measurements_track_id_at", "track_id", "at"),)

    track_id: Mapped[int] = mapped_column(ForeignKey("rollout_tracks.id", ondelete="CASCADE"))
    window_start: Mapped[Instant]
    window_end: Mapped[Instant]
    result: Mapped[str] = mapped_column(String(16))  # pass | fail | inconclusive | error
    latency_result: Mapped[str | None] = mapped_column(String(16))
    alpha: Mapped[float | None] = mapped_column(Float)
    threshold: Mapped[float] = mapped_column(Float)
    drafts: Mapped[float | None] = mapped_column(Float)
    dry_run: Mapped[bool] = mapped_column(Boolean, default=False)
    reason: Mapped[str] = mapped_column(Text, default="")
    values: Mapped[dict | None] = mapped_column(JSONB)


class RolloutEvent(LogRow, Base):
    """Audit log: a stage change (derived or manual), an operator decision or a snapshot; who, when, why
    and the numbers at that moment."""

    __tablename__ = "rollout_events"
    __table_args__ = (Index("ix_rollout_events_track_id_at", "track_id", "at"), Index("ix_rollout_events_at", "at"))

    track_id: Mapped[int] = mapped_column(ForeignKey("rollout_tracks.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))  # derived | manual | snapshot
    action: Mapped[str | None] = mapped_column(String(40))  # manual: sign_off, disable, ...
    from_stage: Mapped[str | None] = mapped_column(String(40))
    to_stage: Mapped[str] = mapped_column(String(40))
    actor: Mapped[str] = mapped_column(String(120))
    reason: Mapped[str] = mapped_column(Text)
    values: Mapped[dict | None] = mapped_column(JSONB)


class BaselineSnapshot(Base):
    """A frozen baseline for a model x class (no concurrent baseline pool): the latency histogram bins and
    means of a window of its baseline pool, used instead of a live baseline for later deltas."""

    __tablename__ = "baseline_snapshots"
    __table_args__ = (Index("ix_baseline_snapshots_model_name_traffic_class", "model_name", "traffic_class"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model_name: Mapped[str] = mapped_column(String(300))
    traffic_class: Mapped[str] = mapped_column(String(120))
    window_start: Mapped[Instant]
    window_end: Mapped[Instant]
    captured_at: Mapped[Instant]
    captured_by: Mapped[str] = mapped_column(String(120))
    reason: Mapped[str] = mapped_column(Text, default="")
    tpot_mean: Mapped[float | None] = mapped_column(Float)
    itl_mean: Mapped[float | None] = mapped_column(Float)
    running_mean: Mapped[float | None] = mapped_column(Float)
    samples: Mapped[int] = mapped_column(Integer, default=0)
    bins: Mapped[dict] = mapped_column(JSONB)  # {"tpot": [{layout_id, bin_end, counts, sum, count}], "itl": [...]}
