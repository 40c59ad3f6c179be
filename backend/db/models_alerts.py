"""Alerting tables: rule config versions, alert state, the transition audit trail, silences,
acknowledgements, incidents (one per model group), channels (encrypted URLs), the outbox with its
delivery attempts, and API tokens (hashed). Imported at the end of models.py so Alembic sees them."""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, column_property, mapped_column

from backend.db.base import Base
from backend.db.models_columns import BigId, Instant, LogRow, OptInstant

__all__ = [
    "Acknowledgement",
    "AlertRuleConfig",
    "AlertStateRow",
    "AlertTransition",
    "ApiToken",
    "Channel",
    "DeliveryAttempt",
    "Incident",
    "IncidentThread",
    "OutboxMessage",
    "Silence",
]


class AlertRuleConfig(Base):
    """One validated version of the rules file (or of an admin's PUT); the newest row is in force."""

    __tablename__ = "alert_rule_configs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)  # the file's `version:` (format version)
    digest: Mapped[str] = mapped_column(String(64))  # sha256 of the canonical JSON
    source: Mapped[str] = mapped_column(String(300))  # file path, or "api"
    content: Mapped[dict] = mapped_column(JSONB)
    created_by: Mapped[str | None] = mapped_column(String(120))
    created_at: Mapped[Instant]


class AlertStateRow(Base):
    """The current state of one alert (rule x label set)."""

    __tablename__ = "alert_states"

    id: Mapped[BigId]
    fingerprint: Mapped[str] = mapped_column(String(32), unique=True)
    rule: Mapped[str] = mapped_column(String(80))
    kind: Mapped[str] = mapped_column(String(40))
    severity: Mapped[str] = mapped_column(String(16))
    labels: Mapped[dict] = mapped_column(JSONB)
    group_key: Mapped[str] = mapped_column(String(400))
    phase: Mapped[str] = mapped_column(String(16))  # inactive | pending | firing | resolved
    pending_since: Mapped[OptInstant]
    firing_since: Mapped[OptInstant]
    last_bad_at: Mapped[OptInstant]
    resolved_at: Mapped[OptInstant]
    last_eval_at: Mapped[OptInstant]
    last_status: Mapped[str | None] = mapped_column(String(16))
    last_value: Mapped[float | None] = mapped_column(Float)
    last_values: Mapped[dict | None] = mapped_column(JSONB)
    notified_firing: Mapped[bool] = mapped_column(Boolean, default=False)
    incident_id: Mapped[int | None] = mapped_column(ForeignKey("alert_incidents.id"))
    acked_by: Mapped[str | None] = mapped_column(String(120))
    acked_at: Mapped[OptInstant]

    __table_args__ = (Index("ix_alert_states_phase", "phase"),)


class AlertTransition(LogRow, Base):
    """Audit trail: every phase change with the values that caused it."""

    __tablename__ = "alert_transitions"

    alert_id: Mapped[int] = mapped_column(ForeignKey("alert_states.id", ondelete="CASCADE"))
    from_phase: Mapped[str] = mapped_column(String(16))
    to_phase: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    value: Mapped[float | None] = mapped_column(Float)
    threshold: Mapped[float | None] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text, default="")
    values: Mapped[dict | None] = mapped_column(JSONB)
    notification: Mapped[str | None] = mapped_column(String(16))  # firing | resolved | None (not sent)
    silence_id: Mapped[int | None] = mapped_column(ForeignKey("silences.id"))
    config_id: Mapped[int | None] = mapped_column(ForeignKey("alert_rule_configs.id"))

    __table_args__ = (Index("ix_alert_transitions_alert_id_at", "alert_id", "at"),
                      Index("ix_alert_transitions_at", "at"))


class Silence(Base):
    __tablename__ = "silences"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    matchers: Mapped[dict] = mapped_column(JSONB)
    starts_at: Mapped[Instant]
    ends_at: Mapped[Instant]
    created_by: Mapped[str] = mapped_column(String(120))
    reason: Mapped[str] = mapped_column(Text)
    created_at: Mapped[Instant]
    expired_by: Mapped[str | None] = mapped_column(String(120))


class Acknowledgement(Base):
    __tablename__ = "alert_acknowledgements"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alert_states.id", ondelete="CASCADE"))
    by: Mapped[str] = mapped_column(String(120))
    comment: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[Instant]


class Incident(Base):
    """One open incident per group (model) while any of its alerts fires: one Slack thread."""

    __tablename__ = "alert_incidents"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_key: Mapped[str] = mapped_column(String(400))
    opened_at: Mapped[Instant]
    closed_at: Mapped[OptInstant]

    __table_args__ = (Index("ix_alert_incidents_group_key", "group_key"),)


class IncidentThread(Base):
    """The Slack message ts an incident's thread hangs on, per channel (Web API channels only)."""

    __tablename__ = "alert_incident_threads"

    incident_id: Mapped[int] = mapped_column(ForeignKey("alert_incidents.id", ondelete="CASCADE"), primary_key=True)
    channel_id: Mapped[int] = mapped_column(ForeignKey("notify_channels.id", ondelete="CASCADE"), primary_key=True)
    thread_ts: Mapped[str] = mapped_column(String(40))


class Channel(Base):
    """Where notifications go. The URL (or bot token) is stored Fernet-encrypted; only `redacted` is shown."""

    __tablename__ = "notify_channels"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(120), unique=True)
    kind: Mapped[str] = mapped_column(String(20))  # slack | slack_api | webhook | alertmanager
    secret: Mapped[str] = mapped_column(Text)  # Fernet token of the URL (and bot token for slack_api)
    redacted: Mapped[str] = mapped_column(String(300))
    options: Mapped[dict] = mapped_column(JSONB, default=dict)  # slack_channel, send_resolved, min_interval
    matchers: Mapped[dict] = mapped_column(JSONB, default=dict)  # which alerts route here (empty: all)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    broken: Mapped[bool] = mapped_column(Boolean, default=False)
    broken_reason: Mapped[str | None] = mapped_column(Text)
    broken_at: Mapped[OptInstant]
    next_send_at: Mapped[OptInstant]  # rate limit / Retry-After
    created_at: Mapped[Instant]


class OutboxMessage(Base):
    """One notification for one channel, written in the transaction of the transition that caused it."""

    __tablename__ = "notify_outbox"
    __table_args__ = (UniqueConstraint("idempotency_key"),
                      Index("ix_notify_outbox_channel_id_status", "channel_id", "status", "id"))

    id: Mapped[BigId]
    idempotency_key: Mapped[str] = mapped_column(String(100))
    channel_id: Mapped[int] = mapped_column(ForeignKey("notify_channels.id", ondelete="CASCADE"))
    incident_id: Mapped[int | None] = mapped_column(ForeignKey("alert_incidents.id"))
    kind: Mapped[str] = mapped_column(String(16))  # firing | resolved | internal | test
    payload: Mapped[dict] = mapped_column(JSONB)  # the channel-neutral notification
    status: Mapped[str] = mapped_column(String(16))  # pending | sending | delivered | failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[Instant]
    last_error: Mapped[str | None] = mapped_column(Text)
    in_doubt: Mapped[bool] = mapped_column(Boolean, default=False)
    resent_after_doubt: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # possible duplicates
    created_at: Mapped[Instant]
    delivered_at: Mapped[OptInstant]


# a channel's delivery health, read with the channel: messages whose delivery was in doubt, and the sends
# made after a doubt (each a possible duplicate at the receiver)
Channel.in_doubt = column_property(
    select(func.count(OutboxMessage.id)).where(OutboxMessage.channel_id == Channel.id, OutboxMessage.in_doubt)
    .correlate_except(OutboxMessage).scalar_subquery(), deferred=True)
Channel.possible_duplicates = column_property(
    select(func.coalesce(func.sum(OutboxMessage.resent_after_doubt), 0))
    .where(OutboxMessage.channel_id == Channel.id).correlate_except(OutboxMessage).scalar_subquery(), deferred=True)


class DeliveryAttempt(LogRow, Base):
    __tablename__ = "notify_attempts"

    outbox_id: Mapped[int] = mapped_column(ForeignKey("notify_outbox.id", ondelete="CASCADE"), index=True)
    outcome: Mapped[str] = mapped_column(String(16))  # delivered | retry_after | transient | permanent | in_doubt
    http_status: Mapped[int | None] = mapped_column(Integer)
    detail: Mapped[str] = mapped_column(Text, default="")


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(120))
    role: Mapped[str] = mapped_column(String(16))  # ingest | gate | viewer | operator | admin (backend.api.auth)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_by: Mapped[str | None] = mapped_column(String(120))
    created_at: Mapped[Instant]
    last_used_at: Mapped[OptInstant]
    revoked_at: Mapped[OptInstant]
    expires_at: Mapped[OptInstant]  # NULL: never
