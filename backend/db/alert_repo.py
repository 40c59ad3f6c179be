"""Every SQL statement of alerting: configs, states, transitions, silences, acks, incidents, channels,
the outbox and API tokens. Nothing here commits; callers own the transaction."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import String, func, or_, select, text, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from backend.db.models_alerts import (
    Acknowledgement,
    AlertRuleConfig,
    AlertStateRow,
    AlertTransition,
    ApiToken,
    Channel,
    DeliveryAttempt,
    Incident,
    IncidentThread,
    OutboxMessage,
    Silence,
)

EVAL_LOCK = 0x5FEC0A1E  # advisory lock key: one evaluation at a time
CHANNEL_LOCK = 0x5FEC0C00  # + channel id: one sender per channel at a time


# --- locks ----------------------------------------------------------------------------------------------


def try_eval_lock(session: Session) -> bool:
    """Transaction-scoped: released at commit/rollback (or when a killed worker's connection drops)."""
    return bool(session.execute(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": EVAL_LOCK}).scalar())


def try_channel_lock(session: Session, channel_id: int) -> bool:
    """Session-scoped (held across several transactions of one sender); gone with the connection."""
    return bool(session.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": CHANNEL_LOCK + channel_id}).scalar())


def channel_unlock(session: Session, channel_id: int) -> None:
    session.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": CHANNEL_LOCK + channel_id})


# --- configs --------------------------------------------------------------------------------------------


def latest_config(session: Session, *, source: str | None = None) -> AlertRuleConfig | None:
    stmt = select(AlertRuleConfig).order_by(AlertRuleConfig.id.desc()).limit(1)
    if source is not None:
        stmt = stmt.where(AlertRuleConfig.source == source)
    return session.scalar(stmt)


def add_config(session: Session, **values) -> AlertRuleConfig:
    row = AlertRuleConfig(**values)
    session.add(row)
    session.flush()
    return row


def list_configs(session: Session, *, limit: int = 50) -> list[AlertRuleConfig]:
    return list(session.scalars(select(AlertRuleConfig).order_by(AlertRuleConfig.id.desc()).limit(limit)))


# --- states and transitions -----------------------------------------------------------------------------


def states(session: Session, *, phases: Sequence[str] | None = None) -> list[AlertStateRow]:
    stmt = select(AlertStateRow).order_by(AlertStateRow.id)
    if phases:
        stmt = stmt.where(AlertStateRow.phase.in_(phases))
    return list(session.scalars(stmt))


def notified_firing_states(session: Session) -> list[AlertStateRow]:
    """Firing alerts whose firing was notified, read afresh (the cycle wrote them with plain statements)."""
    stmt = (select(AlertStateRow).where(AlertStateRow.phase == "firing", AlertStateRow.notified_firing.is_(True))
            .order_by(AlertStateRow.id).execution_options(populate_existing=True))
    return list(session.scalars(stmt))


def last_notified_transitions(session: Session, alert_ids: Sequence[int], notification: str,
                              ) -> dict[int, AlertTransition]:
    """{alert id: its newest transition that sent `notification`} for the given alerts."""
    if not alert_ids:
        return {}
    stmt = (select(AlertTransition).ext(postgresql.distinct_on(AlertTransition.alert_id))
            .where(AlertTransition.alert_id.in_(list(alert_ids)), AlertTransition.notification == notification)
            .order_by(AlertTransition.alert_id, AlertTransition.id.desc()))
    return {t.alert_id: t for t in session.scalars(stmt)}


@dataclass(slots=True)
class StateRecord:
    """One alert_states row as plain values, for the evaluation cycle: it reads every state, steps each and
    writes them back in one statement (`save_states`), without a mapped object per alert (thousands of
    alerts a minute at fleet scale). Same attribute names as AlertStateRow."""

    id: int
    fingerprint: str
    rule: str
    kind: str
    severity: str
    labels: dict
    group_key: str
    phase: str
    pending_since: datetime | None
    firing_since: datetime | None
    last_bad_at: datetime | None
    resolved_at: datetime | None
    last_eval_at: datetime | None
    last_status: str | None
    last_value: float | None
    last_values: dict | None
    notified_firing: bool
    incident_id: int | None
    acked_by: str | None
    acked_at: datetime | None


_STATE_COLUMNS = [AlertStateRow.__table__.c[name] for name in StateRecord.__slots__]
# what the evaluation changes (and save_states writes back)
_SAVED = ("phase", "pending_since", "firing_since", "last_bad_at", "resolved_at", "last_eval_at", "last_status",
          "last_value", "last_values", "notified_firing", "incident_id", "acked_by", "acked_at")


def _array_of(name: str) -> str:
    """`:name` as an array of the column's own type (JSON values arrive as their text). Strings stay text: a
    cast to varchar(n) would cut a longer value short, where storing it refuses it."""
    col_type = AlertStateRow.__table__.c[name].type
    sql_type = "text" if isinstance(col_type, String) else col_type.compile(dialect=postgresql.dialect())
    return f"CAST(:{name} AS {sql_type}[])"


_SAVE_SQL = text(
    "UPDATE alert_states AS s SET " + ", ".join(f"{c} = v.{c}" for c in _SAVED)
    + f" FROM unnest({', '.join(_array_of(c) for c in ('id', *_SAVED))}) AS v(id, {', '.join(_SAVED)})"
    + " WHERE s.id = v.id")


def state_records(session: Session, *, for_update: bool = False) -> list[StateRecord]:
    """Every alert state as a StateRecord, by id (locked FOR UPDATE for the evaluation cycle)."""
    stmt = select(*_STATE_COLUMNS).order_by(AlertStateRow.id)
    if for_update:
        stmt = stmt.with_for_update()
    return [StateRecord(*row) for row in session.execute(stmt)]


def add_state_record(session: Session, **values: Any) -> StateRecord:
    """Insert a new alert state; returns it as a StateRecord (with its id)."""
    row = session.execute(insert(AlertStateRow).values(**values).returning(*_STATE_COLUMNS)).one()
    return StateRecord(*row)


def save_states(session: Session, records: Iterable[StateRecord]) -> int:
    """Write the evaluation's columns of every record back, in one UPDATE; returns the rows written."""
    rows = list(records)
    if not rows:
        return 0
    params: dict[str, list] = {"id": [r.id for r in rows]}
    for c in _SAVED:
        params[c] = [getattr(r, c) for r in rows]
    params["last_values"] = [None if v is None else json.dumps(v) for v in params["last_values"]]
    written = session.execute(_SAVE_SQL, params).rowcount
    for obj in list(session.identity_map.values()):  # a mapped copy loaded earlier reloads the new values
        if isinstance(obj, AlertStateRow):
            session.expire(obj)
    return written


def get_state(session: Session, alert_id: int) -> AlertStateRow | None:
    return session.get(AlertStateRow, alert_id)


def state_by_fingerprint(session: Session, fp: str) -> AlertStateRow | None:
    return session.scalar(select(AlertStateRow).where(AlertStateRow.fingerprint == fp))


def add(session: Session, row):
    session.add(row)
    session.flush()
    return row


def transitions(session: Session, *, alert_id: int | None = None, limit: int = 200,
                since: datetime | None = None) -> list[tuple[AlertTransition, AlertStateRow]]:
    stmt = (select(AlertTransition, AlertStateRow).join(AlertStateRow, AlertStateRow.id == AlertTransition.alert_id)
            .order_by(AlertTransition.id.desc()).limit(limit))
    if alert_id is not None:
        stmt = stmt.where(AlertTransition.alert_id == alert_id)
    if since is not None:
        stmt = stmt.where(AlertTransition.at >= since)
    return [(t, s) for t, s in session.execute(stmt).tuples()]


def acks(session: Session, alert_id: int) -> list[Acknowledgement]:
    return list(session.scalars(select(Acknowledgement).where(Acknowledgement.alert_id == alert_id)
                                .order_by(Acknowledgement.id)))


# --- silences -------------------------------------------------------------------------------------------


def silences(session: Session, *, active_at: datetime | None = None, include_expired: bool = True) -> list[Silence]:
    stmt = select(Silence).order_by(Silence.id.desc())
    if active_at is not None:
        stmt = stmt.where(Silence.starts_at <= active_at, Silence.ends_at > active_at)
    elif not include_expired:
        stmt = stmt.where(Silence.ends_at > func.now())
    return list(session.scalars(stmt))


def get_silence(session: Session, silence_id: int) -> Silence | None:
    return session.get(Silence, silence_id)


# --- incidents ------------------------------------------------------------------------------------------


def open_incident(session: Session, group_key: str) -> Incident | None:
    return session.scalar(select(Incident).where(Incident.group_key == group_key, Incident.closed_at.is_(None))
                          .order_by(Incident.id.desc()).limit(1))


def thread_ts(session: Session, incident_id: int, channel_id: int) -> str | None:
    row = session.get(IncidentThread, (incident_id, channel_id))
    return row.thread_ts if row else None


def set_thread_ts(session: Session, incident_id: int, channel_id: int, ts: str) -> None:
    session.execute(insert(IncidentThread).values(incident_id=incident_id, channel_id=channel_id, thread_ts=ts)
                    .on_conflict_do_nothing())


def incident_sequence(session: Session, incident_id: int, channel_id: int) -> int:
    """How many messages of this incident the channel already has queued (the next is this + 1)."""
    return session.scalar(select(func.count()).select_from(OutboxMessage).where(
        OutboxMessage.incident_id == incident_id, OutboxMessage.channel_id == channel_id)) or 0


# --- channels -------------------------------------------------------------------------------------------


def channels(session: Session) -> list[Channel]:
    return list(session.scalars(select(Channel).order_by(Channel.id)))


def get_channel(session: Session, channel_id: int, *, for_update: bool = False) -> Channel | None:
    return session.get(Channel, channel_id, with_for_update=for_update)


def channel_by_name(session: Session, name: str) -> Channel | None:
    return session.scalar(select(Channel).where(Channel.name == name))


def delete_channel(session: Session, channel: Channel) -> None:
    session.delete(channel)
    session.flush()


# --- outbox ---------------------------------------------------------------------------------------------


def enqueue(session: Session, **values) -> int | None:
    """Insert one message; a repeated idempotency key is a no-op (returns None)."""
    stmt = insert(OutboxMessage).values(**values).on_conflict_do_nothing(index_elements=["idempotency_key"])
    return session.execute(stmt.returning(OutboxMessage.id)).scalar()


def channels_with_work(session: Session) -> list[int]:
    stmt = (select(OutboxMessage.channel_id).join(Channel, Channel.id == OutboxMessage.channel_id)
            .where(OutboxMessage.status.in_(("pending", "sending")), Channel.enabled.is_(True),
                   Channel.broken.is_(False)).distinct())
    return list(session.scalars(stmt))


def head_of_queue(session: Session, channel_id: int) -> OutboxMessage | None:
    """The oldest undelivered message of a channel: strict FIFO keeps firing before resolved."""
    return session.scalar(select(OutboxMessage).where(
        OutboxMessage.channel_id == channel_id, OutboxMessage.status.in_(("pending", "sending")))
        .order_by(OutboxMessage.id).limit(1).with_for_update())


def outbox(session: Session, *, status: str | None = None, limit: int = 200) -> list[OutboxMessage]:
    stmt = select(OutboxMessage).order_by(OutboxMessage.id.desc()).limit(limit)
    if status:
        stmt = stmt.where(OutboxMessage.status == status)
    return list(session.scalars(stmt))


def pending_count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(OutboxMessage)
                          .where(OutboxMessage.status.in_(("pending", "sending")))) or 0


def add_attempt(session: Session, *, outbox_id: int, at: datetime, outcome: str, http_status: int | None,
                detail: str) -> None:
    session.add(DeliveryAttempt(outbox_id=outbox_id, at=at, outcome=outcome, http_status=http_status, detail=detail))


# --- tokens ---------------------------------------------------------------------------------------------


def token_by_hash(session: Session, token_hash: str) -> ApiToken | None:
    return session.scalar(select(ApiToken).where(ApiToken.token_hash == token_hash, ApiToken.revoked_at.is_(None)))


def tokens(session: Session) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))


def get_token(session: Session, token_id: int) -> ApiToken | None:
    return session.get(ApiToken, token_id)


def touch_token(session: Session, token_id: int, now: datetime) -> None:
    session.execute(update(ApiToken).where(ApiToken.id == token_id,
                                           or_(ApiToken.last_used_at.is_(None), ApiToken.last_used_at < now))
                    .values(last_used_at=now))
